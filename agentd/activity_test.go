package agentd

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/ctl"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// TestActivityLineAgrees: a record of every kind, sent over the wire as the
// daemon sends it, reads in agentctl (from the hub or the daemon) exactly
// as `agentd log` prints it.
func TestActivityLineAgrees(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 11, 47, 3, 0, time.UTC)
	records := []activity.Record{
		{Kind: "process.start", Summary: "ran `sleep 9`", Outcome: activity.Started, ObjectID: "p-1"},
		{Kind: "process.start", Summary: "ran `nope`", Outcome: activity.Failed, Error: "not found"},
		{Kind: "process.exit", Summary: "ran `make`", Outcome: activity.OK, ExitCode: 2, Duration: time.Second},
		{Kind: "process.exit", Summary: "ran `sleep 9`", Outcome: activity.Failed, Error: "killed by SIGTERM"},
		{Kind: "process.signal", Summary: "sent TERM to p-1", Outcome: activity.OK},
		{Kind: "process.input", Summary: "wrote 3 bytes to the stdin of p-1", Outcome: activity.OK, Bytes: 3},
		{Kind: "files.write", Summary: "wrote /w/a", Outcome: activity.OK, Actor: "uid:1000(u)", ClaimedActor: "bob"},
		{Kind: "files.edit", Summary: "edit /w/a", Outcome: activity.Failed, Error: "old_string not found"},
		{Kind: "python.run", Summary: "ran python", Outcome: activity.OK, Conversation: "c-1"},
		{Kind: "snapshot.create", Summary: "snapshot s-1", Outcome: activity.OK, ObjectID: "s-1"},
		{Kind: "agent.run", Summary: "agent run codex", Outcome: activity.OK, Actor: "bot"},
		{Kind: "environment.refused", Summary: "refused Exec", Outcome: activity.Failed, Error: "validating"},
		{Kind: activity.KindStop, Summary: "agentd stopping", Outcome: activity.OK},
	}
	for _, r := range records {
		r.Time = at
		for _, machine := range []string{"", "m-abc"} {
			got := ctl.ActivityLine(&hubv1.WatchResponse{Record: recordToProto(r), MachineId: machine})
			if diff := cmp.Diff(got, r.LineOn(machine)); diff != "" {
				t.Errorf("%s on %q: agentctl's line (-got +want agentd log's):\n%s", r.Kind, machine, diff)
			}
		}
	}
}
