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
