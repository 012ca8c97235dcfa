package activityproto_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/activityproto"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

func TestRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		in   *agentdv1.ActivityRecord
		want activity.Record
	}{
		{"nil", nil, activity.Record{}},
		{"every field", &agentdv1.ActivityRecord{
			Seq: 7, Actor: "bot", ClaimedActor: "claude", Conversation: "c1", Kind: "process.exit", Summary: "ran x",
			Command: "x", Cwd: "/w", Path: "/w/f", Bytes: 3, Output: []byte("out"), Error: "boom", ExitCode: 2,
			Duration: durationpb.New(1500 * time.Millisecond), ObjectId: "s-1", Time: timestamppb.New(at),
			Outcome: agentdv1.Outcome_OUTCOME_ERROR,
		}, activity.Record{
			Seq: 7, Actor: "bot", ClaimedActor: "claude", Conversation: "c1", Kind: "process.exit", Summary: "ran x",
			Command: "x", Cwd: "/w", Path: "/w/f", Bytes: 3, Output: []byte("out"), Error: "boom", ExitCode: 2,
			Duration: 1500 * time.Millisecond, ObjectID: "s-1", Time: at, Outcome: activity.Failed,
		}},
		{"started", &agentdv1.ActivityRecord{Outcome: agentdv1.Outcome_OUTCOME_STARTED}, activity.Record{Outcome: activity.Started}},
		{"ok", &agentdv1.ActivityRecord{Outcome: agentdv1.Outcome_OUTCOME_OK}, activity.Record{Outcome: activity.OK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(activityproto.Record(tc.in), tc.want); diff != "" {
				t.Errorf("Record (-got +want):\n%s", diff)
			}
		})
	}
}

// TestLine: the machine column is the machine's name, else its id.
func TestLine(t *testing.T) {
	t.Parallel()
	rec := &agentdv1.ActivityRecord{Summary: "wrote f", Outcome: agentdv1.Outcome_OUTCOME_OK}
	for _, tc := range []struct {
		name string
		in   *hubv1.WatchResponse
		want string
	}{
		{"name", &hubv1.WatchResponse{Record: rec, MachineId: "m-1", MachineName: "laptop"}, activityproto.Record(rec).LineOn("laptop")},
		{"id only", &hubv1.WatchResponse{Record: rec, MachineId: "m-1"}, activityproto.Record(rec).LineOn("m-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(activityproto.Line(tc.in), tc.want); diff != "" {
				t.Errorf("Line (-got +want):\n%s", diff)
			}
		})
	}
}

// TestLineSource: the hub's own records name the token's actor and the
// client program; a daemon's account is labelled as reported, its actor a
// claim.
func TestLineSource(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 15, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		name string
		in   *hubv1.WatchResponse
		want string
	}{
		{"hub", &hubv1.WatchResponse{MachineName: "box", Source: "hub", Record: &agentdv1.ActivityRecord{
			Actor: "alice", Summary: "called FileService/Stat", Time: timestamppb.New(at), Outcome: agentdv1.Outcome_OUTCOME_OK}},
			"2026-12-03 15:00:00  box        alice  called FileService/Stat  → ok"},
		{"hub, with a client", &hubv1.WatchResponse{MachineName: "box", Source: "hub", Record: &agentdv1.ActivityRecord{
			Actor: "alice", Client: "agentctl-mcp/1.2", Summary: "called FileService/Stat", Time: timestamppb.New(at), Outcome: agentdv1.Outcome_OUTCOME_OK}},
			"2026-12-03 15:00:00  box        alice via agentctl-mcp/1.2  called FileService/Stat  → ok"},
		{"the daemon's account", &hubv1.WatchResponse{MachineName: "box", Source: "daemon", Record: &agentdv1.ActivityRecord{
			ClaimedActor: "admin", Summary: "wrote /etc/motd", Time: timestamppb.New(at), Outcome: agentdv1.Outcome_OUTCOME_OK}},
			"2026-12-03 15:00:00  box        reported by the daemon (claims: admin)  wrote /etc/motd  → ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(activityproto.Line(tc.in), tc.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}
