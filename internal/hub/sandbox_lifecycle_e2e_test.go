package hub_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stateOf polls the sandbox's row and its container until both say want
// (the container's engine state: paused, exited, running).
func (h *sandboxHub) awaitState(id, want string, engine sandbox.State, within time.Duration) store.Sandbox {
	h.t.Helper()
	var sb store.Sandbox
	pollUntil(h.t, within, "sandbox "+id+" "+want, func() (bool, string) {
		var err error
		sb, err = h.Store.Sandbox(h.t.Context(), id)
		if err != nil {
			return false, err.Error()
		}
		in, err := h.driver.Inspect(h.t.Context(), sb.ContainerID)
		if err != nil {
			return false, err.Error()
		}
		return sb.State == want && in.State == engine, fmt.Sprintf("row %s (%s), container %s", sb.State, sb.StateReason, in.State)
	})
	return sb
}

// activityNote waits for the hub's record of a call to the sandbox that
// says note.
func (h *sandboxHub) activityNote(id, note string) {
	h.t.Helper()
	pollUntil(h.t, 10*time.Second, "a call record saying "+note, func() (bool, string) {
		recs, err := h.Store.ListActivity(h.t.Context(), store.ActivityQuery{OrgID: h.Org.ID, Limit: store.MaxActivityLimit})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, r := range recs {
			if r.Subject != id || r.Source != store.SourceHub {
				continue
			}
			if strings.Contains(string(r.Record), note) {
				return true, ""
			}
			seen = append(seen, string(r.Record))
		}
		return false, strings.Join(seen, " | ")
	})
}

// The idle policy on the engine: an idle conversation's sandbox is paused
// (its container paused), then stopped (its container exited, its
// workspace volume kept), never removed; one with a call in flight is left
// running; the conversation's next call brings the same sandbox back with
// its /workspace, and that call's record says it resumed it.
//
// The busy conversation's call starts first and runs until the test
// releases it, so that no sandbox's start (2-15 s for a Pod) eats into the
// idle one's paused spell (PauseAfter to StopAfter, 4 s) before the test
// looks.
func TestSandboxIdlePolicy(t *testing.T) {
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.PauseAfter, o.StopAfter = 3*time.Second, 7*time.Second })
	h.require(t, capPause)
	busyCtx := h.ctx("builtin", "c-busy")
	busy := h.sandboxOf(busyCtx)
	st, _ := h.start(busyCtx, &agentdv1.StartRequest{Argv: []string{"sh", "-c", "until [ -e /tmp/release ]; do sleep 0.1; done"}})

	idleCtx := h.ctx("builtin", "c-idle")
	if _, code, err := h.run(idleCtx, "sh", "-c", "echo kept > /workspace/f"); err != nil || code != 0 {
		t.Fatalf("write: exit %d %v", code, err)
	}
	idle := h.sandboxOf(idleCtx)

	paused := h.awaitState(idle, store.SandboxPaused, sandbox.StatePaused, 10*time.Second)
	if paused.StateReason != "idle 3s" {
		t.Errorf("paused for %q, want idle 3s", paused.StateReason)
	}
	stopped := h.awaitState(idle, store.SandboxStopped, sandbox.StateExited, 15*time.Second)
	if stopped.StateReason != "idle 7s" {
		t.Errorf("stopped for %q, want idle 7s", stopped.StateReason)
	}
	vols, err := h.driver.Volumes(t.Context(), map[string]string{sandbox.LabelID: idle})
	if err != nil || len(vols) != 1 {
		t.Fatalf("workspace volume of the stopped sandbox: %v %v, want one", vols, err)
	}
	if sb, err := h.Store.Sandbox(t.Context(), busy); err != nil || sb.State != store.SandboxRunning {
		t.Errorf("the sandbox with a call in flight: %+v %v, want running", sb, err)
	}
	if _, code, err := h.run(busyCtx, "touch", "/tmp/release"); err != nil || code != 0 {
		t.Fatalf("release the busy call: exit %d %v", code, err)
	}
	if _, x, err := untilExit(startEvents(st)); err != nil || x.GetExitCode() != 0 {
		t.Fatalf("the busy sandbox's call: %v %v, want exit 0 once released", x, err)
	}

	// The conversation's next call: the same sandbox, its workspace kept.
	out, code, err := h.run(idleCtx, "cat", "/workspace/f")
	if err != nil || code != 0 || out != "kept\n" {
		t.Fatalf("c-idle after the stop: %q exit %d %v, want kept", out, code, err)
	}
	if again := h.sandboxOf(idleCtx); again != idle {
		t.Errorf("c-idle went to %s, want its stopped sandbox %s back", again, idle)
	}
	if sb, err := h.Store.Sandbox(t.Context(), idle); err != nil || sb.State != store.SandboxRunning {
		t.Errorf("resumed sandbox's row: %+v %v, want running", sb, err)
	}
	h.activityNote(idle, "resumed from stopped in ")
}

// Transitions by request on the engine, through agentctl: pause freezes
// the container and a call resumes it (its record says from paused); stop
// stops it, keeping /workspace; start brings it back; a stopped sandbox
// cannot be paused; a command in flight that a stop cuts says why; several
// ids are each reported, an unknown one is an
// error for that id and a non-zero exit; a member may resume but not
// pause or stop.
func TestSandboxStateCommands(t *testing.T) {
	h := startSandboxHub(t, nil)
	h.require(t, capPause)
	ctl := h.agentctl()
	c1, c2 := h.ctx("builtin", "c-1"), h.ctx("builtin", "c-2")
	if _, code, err := h.run(c1, "sh", "-c", "echo one > /workspace/f && head -c 3000000 /dev/urandom > /workspace/blob"); err != nil || code != 0 {
		t.Fatalf("write: exit %d %v", code, err)
	}
	sb1, sb2 := h.sandboxOf(c1), h.sandboxOf(c2)

	code, out, errOut := ctl("sandbox", "pause", sb1, sb2)
	if code != 0 || out != sb1+" paused (was running)\n"+sb2+" paused (was running)\n" {
		t.Fatalf("sandbox pause: exit %d %q %q", code, out, errOut)
	}
	h.awaitState(sb1, store.SandboxPaused, sandbox.StatePaused, 5*time.Second)
	// Measured before the pause: 3 MB and a few bytes, in KiB blocks.
	if sb, _ := h.Store.Sandbox(t.Context(), sb1); sb.WorkspaceBytes < 3000000 || sb.WorkspaceBytes > 3200000 || sb.WorkspaceAt.IsZero() {
		t.Errorf("workspace measured at the pause: %d bytes at %v, want about 3 MB", sb.WorkspaceBytes, sb.WorkspaceAt)
	}
	if code, out, _ := ctl("sandbox", "pause", sb1); code != 0 || out != sb1+" paused (was paused)\n" {
		t.Errorf("sandbox pause of a paused one: exit %d %q", code, out)
	}
	if out, code, err := h.run(c1, "cat", "/workspace/f"); err != nil || code != 0 || out != "one\n" {
		t.Fatalf("a call to the paused sandbox: %q exit %d %v, want one", out, code, err)
	}
	h.awaitState(sb1, store.SandboxRunning, sandbox.StateRunning, 5*time.Second)
	h.activityNote(sb1, "resumed from paused in ")

	// A command in flight when its sandbox is stopped: the call says why.
	st, _ := h.start(c1, &agentdv1.StartRequest{Argv: []string{"sleep", "60"}})
	code, out, errOut = ctl("sandbox", "stop", sb1)
	if code != 0 || out != sb1+" stopped (was running)\n" {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	h.awaitState(sb1, store.SandboxStopped, sandbox.StateExited, 5*time.Second)
	// agentd ends its processes on SIGTERM: the caller sees them killed,
	// the hub's record of the call says why.
	if _, x, err := untilExit(startEvents(st)); err == nil && x.GetSignal() == "" {
		t.Errorf("the call in flight when its sandbox stopped: exit %v, want a signal or an error", x)
	}
	h.activityNote(sb1, "sandbox stopped by tester")
	code, out, errOut = ctl("sandbox", "pause", sb1, "sb-nope")
	if code == 0 || out != "" || !strings.Contains(errOut, sb1+": ") || !strings.Contains(errOut, "is stopped") ||
		!strings.Contains(errOut, "sb-nope: ") || !strings.Contains(errOut, "not found") {
		t.Errorf("sandbox pause of a stopped and an unknown one: exit %d %q %q; want both refused, non-zero", code, out, errOut)
	}
	if sb, _ := h.Store.Sandbox(t.Context(), sb1); sb.State != store.SandboxStopped {
		t.Errorf("after a refused pause: %s, want stopped", sb.State)
	}

	code, out, errOut = ctl("--json", "sandbox", "ls")
	if code != 0 || !strings.Contains(out, `"state":"stopped"`) || !strings.Contains(out, `"state":"paused"`) || !strings.Contains(out, `"next_step":"stops in `) {
		t.Errorf("sandbox ls --json: exit %d %q %q; want a stopped and a paused one, and a next step", code, out, errOut)
	}
	if !strings.Contains(out, `"workspace_bytes":"`) {
		t.Errorf("sandbox ls --json: %q; want workspace_bytes", out)
	}
	code, out, _ = ctl("sandbox", "ls")
	if code != 0 || !strings.Contains(out, "STATE") || !strings.Contains(out, "LAST USED") || !strings.Contains(out, "NEXT") ||
		!strings.Contains(out, "SIZE") || !strings.Contains(out, " 2.9 MiB ") {
		t.Errorf("sandbox ls: exit %d %q; want STATE, LAST USED, NEXT and WORKSPACE columns, 2.9 MiB measured", code, out)
	}

	code, out, errOut = ctl("sandbox", "start", sb1)
	if code != 0 || !strings.HasPrefix(out, sb1+" running (was stopped") {
		t.Fatalf("sandbox start: exit %d %q %q", code, out, errOut)
	}
	if out, code, err := h.run(h.byID(sb1), "cat", "/workspace/f"); err != nil || code != 0 || out != "one\n" {
		t.Errorf("a call to the started sandbox: %q exit %d %v, want one", out, code, err)
	}
	if _, err := h.driver.Inspect(t.Context(), "agentd-"+sb2); errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the paused sandbox's container is gone")
	}

	// A member resumes (a call would), but cannot pause or stop.
	member := h.memberctl()
	if code, _, errOut := member("sandbox", "stop", sb2); code == 0 || !strings.Contains(errOut, "admin token") {
		t.Errorf("member sandbox stop: exit %d %q; want refused, needing an admin token", code, errOut)
	}
	if code, out, errOut := member("sandbox", "resume", sb2); code != 0 || !strings.HasPrefix(out, sb2+" running (was paused") {
		t.Errorf("member sandbox resume: exit %d %q %q", code, out, errOut)
	}
}

// memberctl is agentctl as a member token of the hub's org.
func (h *sandboxHub) memberctl() func(args ...string) (int, string, string) {
	secret, hash := store.NewToken()
	if _, err := h.Store.CreateToken(h.t.Context(), store.Token{OrgID: h.Org.ID, Name: "member", Role: store.RoleMember, Hash: hash, CreatedAt: time.Now()}); err != nil {
		h.t.Fatal(err)
	}
	tf := filepath.Join(h.t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(secret), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := ctl.Main(h.t.Context(), append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
}

// A hub restart keeps each sandbox's state: a paused one stays paused and
// a stopped one stopped (neither is started by the restart's reconcile);
// a paused one whose container was stopped meanwhile (the host restarted)
// is stopped; each conversation's next call brings its sandbox back with
// its /workspace.
func TestSandboxStatesSurviveRestart(t *testing.T) {
	h := startSandboxHub(t, nil)
	h.require(t, capPause)
	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	ids := map[string]string{}
	for _, conv := range []string{"c-paused", "c-stopped", "c-host"} {
		if _, code, err := h.run(h.ctx("builtin", conv), "sh", "-c", "echo "+conv+" > /workspace/f"); err != nil || code != 0 {
			t.Fatalf("write in %s: exit %d %v", conv, code, err)
		}
		ids[conv] = h.sandboxOf(h.ctx("builtin", conv))
	}
	for conv, action := range map[string]string{"c-paused": "pause", "c-stopped": "stop", "c-host": "pause"} {
		if _, err := envs.ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: ids[conv], Action: action}); err != nil {
			t.Fatalf("%s %s: %v", action, conv, err)
		}
	}
	h.Stop()
	h.stopContainer("agentd-" + ids["c-host"])
	h.Serve(h.Addr)
	h.awaitState(ids["c-paused"], store.SandboxPaused, sandbox.StatePaused, 5*time.Second)
	h.awaitState(ids["c-stopped"], store.SandboxStopped, sandbox.StateExited, 5*time.Second)
	h.awaitState(ids["c-host"], store.SandboxStopped, sandbox.StateExited, 5*time.Second)
	for conv, id := range ids {
		out, code, err := h.run(h.ctx("builtin", conv), "cat", "/workspace/f")
		if err != nil || code != 0 || out != conv+"\n" {
			t.Errorf("%s after the restart: %q exit %d %v, want its workspace", conv, out, code, err)
		}
		if got := h.sandboxOf(h.ctx("builtin", conv)); got != id {
			t.Errorf("%s reached %s after the restart, want %s", conv, got, id)
		}
	}
}

// A sandbox paused for longer than the hub's tunnel keepalive (20 s + 10 s)
// has lost its tunnel by the time a call comes; the call unpauses it, waits
// for its agentd to dial in again, and runs, with its /workspace.
func TestSandboxLongPause(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 40 s")
	}
	h := startSandboxHub(t, nil)
	ctx := h.ctx("builtin", "c-long")
	h.require(t, capPause)
	if _, code, err := h.run(ctx, "sh", "-c", "echo long > /workspace/f"); err != nil || code != 0 {
		t.Fatalf("write: exit %d %v", code, err)
	}
	id := h.sandboxOf(ctx)
	if _, err := hubv1.NewEnvironmentServiceClient(h.cc).ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: "pause"}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "the paused sandbox's tunnel closed by the hub's keepalive", func() (bool, string) {
		for _, sb := range h.listSandboxes() {
			if sb.GetId() == id {
				return !sb.GetOnline(), sb.GetState()
			}
		}
		return false, "not listed"
	})
	began := time.Now()
	out, code, err := h.run(ctx, "cat", "/workspace/f")
	if err != nil || code != 0 || out != "long\n" {
		t.Fatalf("a call after a long pause: %q exit %d %v, want long", out, code, err)
	}
	t.Logf("resumed after the tunnel was gone: first exec in %v", time.Since(began))
	h.activityNote(id, "resumed from paused in ")
}

// TestSandboxContainerPrunedKeepsWorkspace: a stopped sandbox whose
// container is removed outside the hub (docker container prune) keeps its
// row and its /workspace volume (on Kubernetes: its record deleted, its
// claim kept) — across a hub restart, and when a call
// comes, which is refused saying what happened and what to do — and
// `sandbox rm` then starts the conversation afresh.
func TestSandboxContainerPrunedKeepsWorkspace(t *testing.T) {
	h := startSandboxHub(t, nil)
	c := h.ctx("builtin", "c-pruned")
	if _, code, err := h.run(c, "sh", "-c", "echo kept > /workspace/f"); err != nil || code != 0 {
		t.Fatalf("write: exit %d %v", code, err)
	}
	id := h.sandboxOf(c)
	ctl := h.agentctl()
	if code, out, errOut := ctl("sandbox", "stop", id); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	h.awaitState(id, store.SandboxStopped, sandbox.StateExited, h.within(10*time.Second))
	// Removed as docker container prune does: the container, not its
	// volume (on Kubernetes the sandbox's record, not its claim).
	h.removeContainer("agentd-" + id)
	volume := func() int {
		vols, err := h.driver.Volumes(t.Context(), map[string]string{sandbox.LabelID: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(vols)
	}
	h.Stop()
	h.Serve(h.Addr)
	if sb, err := h.Store.Sandbox(t.Context(), id); err != nil || sb.State != store.SandboxStopped {
		t.Fatalf("after a restart: %+v %v; want the row kept, stopped", sb, err)
	}
	if volume() != 1 {
		t.Fatal("after a restart the workspace volume is gone")
	}
	_, _, err := h.run(c, "cat", "/workspace/f")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "removed outside the hub") || !strings.Contains(err.Error(), "sandbox rm "+id) {
		t.Fatalf("a call after the prune: %v; want FAILED_PRECONDITION saying what happened and what to do", err)
	}
	// In the words of the engine the operator runs (never Docker's on a cluster).
	w := sandbox.TermsOf(h.driver)
	if !strings.Contains(err.Error(), "its "+w.Container+" was removed") || !strings.Contains(err.Error(), "kept on "+w.Volume+" ") ||
		(h.kube != nil && strings.Contains(strings.ToLower(err.Error()), "docker")) {
		t.Errorf("a call after the prune: %v; want it to name the %s and %s", err, w.Container, w.Volume)
	}
	if volume() != 1 {
		t.Fatal("after the refused call the workspace volume is gone")
	}
	if code, out, errOut := ctl("sandbox", "rm", id); code != 0 {
		t.Fatalf("sandbox rm: exit %d %q %q", code, out, errOut)
	}
	if out, code, err := h.run(c, "sh", "-c", "ls /workspace"); err != nil || code != 0 || out != "" {
		t.Errorf("after sandbox rm, a call: %q exit %d %v; want a fresh, empty workspace", out, code, err)
	}
}
