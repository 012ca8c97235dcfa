package activity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLineEveryKind renders one record of every kind the daemon and the hub
// write: only a process's exit shows an exit code.
func TestLineEveryKind(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 11, 47, 3, 0, time.Local)
	const ts = "2026-12-02 11:47:03  "
	tests := []struct {
		name string
		r    Record
		want string
	}{
		{"process start", Record{Kind: "process.start", Summary: "ran `sleep 9` in /w", Outcome: Started, ObjectID: "p-1"},
			"alice  ran `sleep 9` in /w  → started p-1"},
		{"process start refused", Record{Kind: "process.start", Summary: "ran `nope`", Outcome: Failed, Error: "nope: not found on PATH"},
			"alice  ran `nope`  → error: nope: not found on PATH"},
		{"process exit 0", Record{Kind: "process.exit", Summary: "ran `true` in /w", Outcome: OK, Duration: 1200 * time.Millisecond},
			"alice  ran `true` in /w  → exit 0 (1.2s)"},
		{"process exit 2", Record{Kind: "process.exit", Summary: "ran `make` in /w", Outcome: OK, ExitCode: 2},
			"alice  ran `make` in /w  → exit 2"},
		{"process killed", Record{Kind: "process.exit", Summary: "ran `sleep 9` in /w", Outcome: Failed, Error: "killed by SIGTERM"},
			"alice  ran `sleep 9` in /w  → error: killed by SIGTERM"},
		{"process timed out", Record{Kind: "process.exit", Summary: "ran `sleep 9` in /w", Outcome: Failed, Error: "timed out"},
			"alice  ran `sleep 9` in /w  → error: timed out"},
		{"process signal", Record{Kind: "process.signal", Summary: "sent TERM to p-1", Outcome: OK, ObjectID: "p-1"},
			"alice  sent TERM to p-1  → ok"},
		{"process input", Record{Kind: "process.input", Summary: "wrote 3 bytes to the stdin of p-1", Outcome: OK, Bytes: 3},
			"alice  wrote 3 bytes to the stdin of p-1  → ok"},
		{"files write", Record{Kind: "files.write", Summary: "wrote /w/a (3 bytes)", Outcome: OK, Path: "/w/a"},
			"alice  wrote /w/a (3 bytes)  → ok"},
		{"files edit failed", Record{Kind: "files.edit", Summary: "edit /w/a", Outcome: Failed, Error: "old_string occurs 3 times\n(lines 4, 19, 40)"},
			"alice  edit /w/a  → error: old_string occurs 3 times (lines 4, 19, 40)"},
		{"files stat", Record{Kind: "files.stat", Summary: "stat /w", Outcome: OK}, "alice  stat /w  → ok"},
		{"python run", Record{Kind: "python.run", Summary: "ran python (3 lines)", Outcome: OK, Duration: 40 * time.Millisecond},
			"alice  ran python (3 lines)  → ok (40ms)"},
		{"python error", Record{Kind: "python.run", Summary: "ran python (1 line)", Outcome: Failed, Error: "ZeroDivisionError: division by zero"},
			"alice  ran python (1 line)  → error: ZeroDivisionError: division by zero"},
		{"snapshot create", Record{Kind: "snapshot.create", Summary: "snapshot s-1 of /w", Outcome: OK, ObjectID: "s-1"},
			"alice  snapshot s-1 of /w  → ok"},
		{"snapshot restore", Record{Kind: "snapshot.restore", Summary: "restored s-1", Outcome: OK}, "alice  restored s-1  → ok"},
		{"agent run", Record{Kind: "agent.run", Summary: "agent run codex", Outcome: OK}, "alice  agent run codex  → ok"},
		{"environment refused", Record{Kind: "environment.refused", Summary: "refused Exec: environment py is validating", Outcome: Failed, Error: "environment py is validating"},
			"alice  refused Exec: environment py is validating  → error: environment py is validating"},
		{"daemon stop", Record{Kind: KindStop, Summary: "agentd stopping", Outcome: OK}, "alice  agentd stopping  → ok"},
		{"no outcome", Record{Kind: "x", Summary: "something"}, "alice  something"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.r
			r.Time, r.Actor = at, "alice"
			if diff := cmp.Diff(r.Line(), ts+tt.want); diff != "" {
				t.Errorf("Line() (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(r.LineOn("m-abc"), ts+"m-abc      "+tt.want); diff != "" {
				t.Errorf("LineOn(m-abc) (-got +want):\n%s", diff)
			}
		})
	}
}

// TestLineActor: the actor column of every sort of caller.
func TestLineActor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    Record
		want string
	}{
		{"own record", Record{Summary: "s", Outcome: OK}, "agentd  s  → ok"},
		{"claim", Record{Actor: "uid:1000(u)", ClaimedActor: "bob", Summary: "s", Outcome: OK}, "uid:1000(u) (claims: bob)  s  → ok"},
		{"conversation", Record{Actor: "bot", Conversation: "c-9", Summary: "s", Outcome: OK}, "bot (c-9)  s  → ok"},
	}
	for _, tt := range tests {
		r := tt.r
		r.Time = time.Date(2026, 12, 2, 11, 47, 3, 0, time.Local)
		if diff := cmp.Diff(r.Line(), "2026-12-02 11:47:03  "+tt.want); diff != "" {
			t.Errorf("%s: Line() (-got +want):\n%s", tt.name, diff)
		}
	}
}
