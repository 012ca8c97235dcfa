package console

import (
	"slices"
	"testing"

	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// TestSandboxActions: each state gets the buttons that apply to it;
// a member gets only resume, start and restore; a warm-pool sandbox (no
// conversation), a starting and a failed one only Remove (admins).
func TestSandboxActions(t *testing.T) {
	t.Parallel()
	names := func(l []sbAction) []string {
		var out []string
		for _, a := range l {
			out = append(out, a.Name)
		}
		return out
	}
	for _, c := range []struct {
		state, conv   string
		admin, member []string
	}{
		{"running", "c", []string{"pause", "stop", "archive", "remove"}, nil},
		{"paused", "c", []string{"resume", "stop", "archive", "remove"}, []string{"resume"}},
		{"stopped", "c", []string{"start", "archive", "remove"}, []string{"start"}},
		{"archived", "c", []string{"restore", "remove"}, []string{"restore"}},
		{"starting", "c", []string{"remove"}, nil},
		{"failed", "c", []string{"remove"}, nil},
		{"running", "", []string{"remove"}, nil},
	} {
		sb := &hubv1.Sandbox{State: c.state, Conversation: c.conv}
		if got := names(actionsFor(sb, true)); !slices.Equal(got, c.admin) {
			t.Errorf("%s (conversation %q), admin: %v, want %v", c.state, c.conv, got, c.admin)
		}
		if got := names(actionsFor(sb, false)); !slices.Equal(got, c.member) {
			t.Errorf("%s (conversation %q), member: %v, want %v", c.state, c.conv, got, c.member)
		}
	}
	for _, a := range sbActions {
		if a.Confirm != (a.Name == "stop" || a.Name == "archive" || a.Name == "remove") {
			t.Errorf("%s: confirm %v", a.Name, a.Confirm)
		}
	}
}

// TestSandboxDoneText: the page says what an action did only for an
// action it has, about a sandbox listed (removed: one not listed).
func TestSandboxDoneText(t *testing.T) {
	t.Parallel()
	rows := []sbRow{{ID: "sb-1"}}
	for _, c := range []struct{ action, id, want string }{
		{"pause", "sb-1", "Sandbox sb-1 paused."},
		{"stop", "sb-1", "Sandbox sb-1 stopped."},
		{"remove", "sb-2", "Sandbox sb-2 removed with its /workspace."},
		{"remove", "sb-1", ""},
		{"pause", "sb-2", ""},
		{"explode", "sb-1", ""},
		{"pause", "", ""},
	} {
		if got := doneText(c.action, c.id, rows); got != c.want {
			t.Errorf("doneText(%q, %q) = %q, want %q", c.action, c.id, got, c.want)
		}
	}
	if got := shortImage("ghcr.io/x/y@sha256:" + "0123456789abcdef0123"); got != "ghcr.io/x/y@sha256:0123456789ab…" {
		t.Errorf("shortImage: %q", got)
	}
	if got := shortImage("ghcr.io/x/y:1"); got != "ghcr.io/x/y:1" {
		t.Errorf("shortImage of a tag: %q", got)
	}
}
