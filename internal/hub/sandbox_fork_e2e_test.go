package hub_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// forkTree writes the source's workspace: a file, a mode, a symlink, an
// empty directory.
const forkTree = `echo v1 > /workspace/f && mkdir -p /workspace/d/empty && echo x > /workspace/d/x && chmod 640 /workspace/d/x && ln -s d/x /workspace/l`

// forkCheck prints what a fork's workspace holds of forkTree.
const forkCheck = `cat /workspace/f; find /workspace/d/x -printf '%m %u\n'; readlink /workspace/l; [ -d /workspace/d/empty ] && echo empty-dir`

const forkWant = "v1\n640 agent\nd/x\nempty-dir\n"

// Fork on the engine: agentctl sandbox fork prints the new ids alone, one
// per line; each fork holds the source's workspace (content, modes,
// owner, symlinks, empty directories) and serves its own conversation,
// and writes in one show in no other nor in the source; the source is left
// running, paused or stopped as it was; a count past --org-max-sandboxes is
// refused before any fork is made; bad ids, counts and taken names are
// clear errors; a member's token is refused.
func TestSandboxFork(t *testing.T) {
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.OrgMaxSandboxes = 5 })
	h.require(t, capPause)
	ctl := h.agentctl()
	srcCtx := h.ctx("builtin", "c-src")
	if out, code, err := h.run(srcCtx, "sh", "-c", forkTree); err != nil || code != 0 {
		t.Fatalf("write the source's tree: %q exit %d %v", out, code, err)
	}
	src := h.sandboxOf(srcCtx)
	check := func(conv, want string) {
		t.Helper()
		out, code, err := h.run(h.ctx("builtin", conv), "sh", "-c", forkCheck)
		if err != nil || code != 0 || out != want {
			t.Errorf("%s's workspace: %q exit %d %v, want %q", conv, out, code, err, want)
		}
	}
	convOf := func(id string) string {
		t.Helper()
		sb, err := h.Store.Sandbox(t.Context(), id)
		if err != nil {
			t.Fatalf("fork %s: %v", id, err)
		}
		if sb.Image != mustSandbox(t, h, src).Image || sb.Environment != "builtin" {
			t.Errorf("fork %s runs %s of %s, want the source's image and environment", id, sb.Image, sb.Environment)
		}
		return sb.Conversation
	}

	// One fork of a running source: the source runs on.
	code, out, errOut := ctl("sandbox", "fork", src)
	ids := strings.Fields(out)
	if code != 0 || len(ids) != 1 || out != ids[0]+"\n" || !strings.HasPrefix(ids[0], "sb-") {
		t.Fatalf("sandbox fork: exit %d %q %q; want one id alone on stdout", code, out, errOut)
	}
	one := convOf(ids[0])
	if !strings.HasPrefix(one, "c-src-fork-") {
		t.Errorf("a fork without --conversation serves %q, want c-src-fork-…", one)
	}
	check(one, forkWant)
	if got := h.sandboxOf(h.ctx("builtin", one)); got != ids[0] {
		t.Errorf("conversation %s reached %s, want the fork %s", one, got, ids[0])
	}
	h.awaitState(src, store.SandboxRunning, sandbox.StateRunning, 5*time.Second)
	if _, code, err := h.run(h.ctx("builtin", one), "sh", "-c", "echo fork > /workspace/f"); err != nil || code != 0 {
		t.Fatalf("write in the fork: exit %d %v", code, err)
	}
	check("c-src", forkWant)

	// Three forks of a paused source, named: it stays paused.
	if code, out, errOut := ctl("sandbox", "pause", src); code != 0 {
		t.Fatalf("sandbox pause: %d %q %q", code, out, errOut)
	}
	code, out, errOut = ctl("sandbox", "fork", src, "--count", "3", "--conversation", "try")
	three := strings.Fields(out)
	if code != 0 || len(three) != 3 {
		t.Fatalf("sandbox fork --count 3: exit %d %q %q", code, out, errOut)
	}
	h.awaitState(src, store.SandboxPaused, sandbox.StatePaused, 5*time.Second)
	var convs []string
	for _, id := range three {
		convs = append(convs, convOf(id))
	}
	if !slices.Equal(convs, []string{"try-1", "try-2", "try-3"}) {
		t.Errorf("forks serve %v, want try-1 try-2 try-3", convs)
	}
	if _, code, err := h.run(h.ctx("builtin", "try-1"), "sh", "-c", "echo one > /workspace/f; rm /workspace/l"); err != nil || code != 0 {
		t.Fatalf("write in try-1: exit %d %v", code, err)
	}
	check("try-2", forkWant)
	check("try-3", forkWant)
	if code, out, _ := ctl("sandbox", "ls"); code != 0 || !strings.Contains(out, "try-2") || !strings.Contains(out, one) {
		t.Errorf("sandbox ls does not show the forks' conversations: %q", out)
	}

	// Quota: source (paused: counted) + 4 forks = 5, the limit.
	before, _ := h.Store.ListSandboxes(t.Context(), h.Org.ID)
	code, out, errOut = ctl("sandbox", "fork", src, "--count", "2")
	if code == 0 || out != "" || !strings.Contains(errOut, "--org-max-sandboxes") {
		t.Errorf("fork past the limit: exit %d %q %q; want refused naming --org-max-sandboxes", code, out, errOut)
	}
	if after, _ := h.Store.ListSandboxes(t.Context(), h.Org.ID); len(after) != len(before) {
		t.Errorf("a refused fork left %d sandboxes, want %d", len(after), len(before))
	}

	// A stopped source (not counted) forks, and stays stopped.
	if code, out, errOut := ctl("sandbox", "stop", src); code != 0 {
		t.Fatalf("sandbox stop: %d %q %q", code, out, errOut)
	}
	code, out, errOut = ctl("sandbox", "fork", src, "--conversation", "from-stopped")
	if code != 0 || len(strings.Fields(out)) != 1 {
		t.Fatalf("fork of a stopped source: exit %d %q %q", code, out, errOut)
	}
	h.awaitState(src, store.SandboxStopped, sandbox.StateExited, 5*time.Second)
	check("from-stopped", forkWant)

	// Clear refusals, nothing made.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "fork", "sb-nosuch"}, "not found"},
		{[]string{"sandbox", "fork", src, "--count", "0"}, "want 1 to 16"},
		{[]string{"sandbox", "fork", src, "--count", "17"}, "want 1 to 16"},
		{[]string{"sandbox", "fork"}, "needs one sandbox id"},
		{[]string{"sandbox", "fork", src, "--conversation", "try-1"}, "has a sandbox already"},
	} {
		if code, out, errOut := ctl(tc.args...); code == 0 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d %q %q; want refused saying %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, _, errOut := h.memberctl()("sandbox", "fork", src); code == 0 || !strings.Contains(errOut, "admin token") {
		t.Errorf("member sandbox fork: exit %d %q; want refused, needing an admin token", code, errOut)
	}
}

func mustSandbox(t *testing.T, h *sandboxHub, id string) store.Sandbox {
	t.Helper()
	sb, err := h.Store.Sandbox(t.Context(), id)
	if err != nil {
		t.Fatalf("sandbox %s: %v", id, err)
	}
	return sb
}

// A fork keeps its source's isolation: under each (runc, gVisor) the fork
// holds the source's workspace and runs on the source's kernel.
func TestSandboxForkIsolation(t *testing.T) {
	isolations(t, nil, func(t *testing.T, iso string, h *sandboxHub) {
		h.require(t, capPause)
		src := h.ctx("builtin", "c-iso")
		if out, code, err := h.run(src, "sh", "-c", forkTree); err != nil || code != 0 {
			t.Fatalf("write the source's tree: %q exit %d %v", out, code, err)
		}
		code, out, errOut := h.agentctl()("sandbox", "fork", h.sandboxOf(src), "--conversation", "c-iso-fork")
		if code != 0 || len(strings.Fields(out)) != 1 {
			t.Fatalf("sandbox fork: exit %d %q %q", code, out, errOut)
		}
		fork := h.ctx("builtin", "c-iso-fork")
		if got, code, err := h.run(fork, "sh", "-c", forkCheck); err != nil || code != 0 || got != forkWant {
			t.Errorf("the %s fork's workspace: %q exit %d %v, want %q", iso, got, code, err, forkWant)
		}
		h.checkKernel(t, fork, iso)
	})
}
