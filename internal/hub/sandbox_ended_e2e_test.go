package hub_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// actor is the name of the admin token of sandboxHub (hubtest's default).
const actor = "tester"

// startDetached starts argv in the sandbox of ctx and leaves it running:
// the caller hangs up once it started. It returns the process's id.
func (h *sandboxHub) startDetached(ctx context.Context, argv ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := agentdv1.NewProcessServiceClient(h.cc).Start(ctx, &agentdv1.StartRequest{Argv: argv})
	if err != nil {
		h.t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || ev.GetEvent().GetStarted() == nil {
		h.t.Fatalf("start %v: %v %v", argv, ev, err)
	}
	return ev.GetEvent().GetStarted().GetId()
}

// processRecord waits for the hub's activity record of the end of process
// pid of sandbox id, saying reason.
func (h *sandboxHub) processRecord(id, pid, reason string) {
	h.t.Helper()
	pollUntil(h.t, 10*time.Second, "the record of "+pid+" ended: "+reason, func() (bool, string) {
		recs, err := h.Store.ListActivity(h.t.Context(), store.ActivityQuery{OrgID: h.Org.ID, Limit: store.MaxActivityLimit})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, r := range recs {
			if r.Subject != id || r.Source != store.SourceHub {
				continue
			}
			s := string(r.Record)
			if strings.Contains(s, `"kind":"process.exit"`) && strings.Contains(s, pid) && strings.Contains(s, reason) {
				return true, ""
			}
			seen = append(seen, s)
		}
		return false, strings.Join(seen, " | ")
	})
}

// A process that a stop ended (its sandbox paused first, as the idle
// policy does) is gone with its sandbox's agentd; the hub answers for it,
// after its own restart too: the activity says it ended and why; attach
// prints the reason and exits as for a process killed by SIGTERM (143),
// and its call's record says so;
// ps lists it, killed, with the reason; Wait returns its record; a signal
// to it is NOT_FOUND saying what ended it. An id that never ran is still
// NOT_FOUND.
func TestSandboxProcessEndedByStop(t *testing.T) {
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.WarmBuiltin = 0 })
	h.require(t, capPause)
	ctl := h.agentctl()
	ctx := h.ctx("builtin", "c-ended")
	pid := h.startDetached(ctx, "sleep", "600")
	id := h.sandboxOf(ctx)
	if code, out, errOut := ctl("sandbox", "pause", id); code != 0 {
		t.Fatalf("sandbox pause: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := ctl("sandbox", "stop", id); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	h.awaitState(id, store.SandboxStopped, sandbox.StateExited, 10*time.Second)
	reason := "sandbox stopped by " + actor
	h.processRecord(id, pid, reason)

	// What the hub keeps is in its store: a restart forgets nothing.
	h.Stop()
	h.Serve(h.Addr)
	if code, out, errOut := ctl("sandbox", "start", id); code != 0 {
		t.Fatalf("sandbox start: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut := ctl("--machine", id, "attach", pid)
	if code != 128+15 || !strings.Contains(errOut, "[agentctl: "+reason+"]") {
		t.Errorf("attach to %s after the stop: exit %d %q %q; want 143 and the reason", pid, code, out, errOut)
	}
	h.activityNote(id, "attached to "+pid+", killed by TERM: "+reason) // the attach call's record
	code, out, errOut = ctl("--machine", id, "ps")
	var line string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, pid+" ") {
			line = l
		}
	}
	if code != 0 || !strings.Contains(line, "killed TERM ("+reason+")") || !strings.Contains(line, "sleep 600") {
		t.Errorf("ps after the stop: exit %d %q %q; want %s killed TERM (%s)", code, out, errOut, pid, reason)
	}
	procs := agentdv1.NewProcessServiceClient(h.cc)
	w, err := procs.Wait(h.byID(id), &agentdv1.WaitRequest{Id: pid})
	if x := w.GetProcess().GetExited(); err != nil || x.GetReason() != reason || x.GetSignal() != "TERM" ||
		w.GetProcess().GetState() != agentdv1.ProcessState_PROCESS_STATE_EXITED {
		t.Errorf("wait for %s: %v %v; want it exited, killed by TERM, for %q", pid, w, err, reason)
	}
	_, err = procs.Signal(h.byID(id), &agentdv1.SignalRequest{Id: pid, Signal: "KILL"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), reason) {
		t.Errorf("signal to %s: %v; want NotFound saying %q", pid, err, reason)
	}
	at, err := procs.Attach(h.byID(id), &agentdv1.AttachRequest{Id: "p-never"})
	if err == nil {
		_, err = at.Recv()
	}
	if status.Code(err) != codes.NotFound && status.Code(err) != codes.InvalidArgument {
		t.Errorf("attach to a process that never was: %v; want NotFound or InvalidArgument", err)
	}
}

// An archive (a stop first) and a delete end a sandbox's processes too:
// after the restore, attach and ps say the archive ended it; a delete's
// activity says the delete did, killed by SIGKILL (the engine removes the
// running container).
func TestSandboxProcessEndedByArchiveAndDelete(t *testing.T) {
	st, _ := openArchive(t)
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.WarmBuiltin, o.Archive = 0, st })
	ctl := h.agentctl()
	ctx := h.ctx("builtin", "c-archived")
	pid := h.startDetached(ctx, "sh", "-c", "sleep 600")
	id := h.sandboxOf(ctx)
	if code, out, errOut := ctl("sandbox", "archive", id); code != 0 {
		t.Fatalf("sandbox archive: exit %d %q %q", code, out, errOut)
	}
	reason := "sandbox archived by " + actor
	h.processRecord(id, pid, reason)
	if code, out, errOut := ctl("sandbox", "restore", id); code != 0 {
		t.Fatalf("sandbox restore: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut := ctl("--machine", id, "attach", pid)
	if code != 128+15 || !strings.Contains(errOut, "[agentctl: "+reason+"]") {
		t.Errorf("attach to %s after the archive: exit %d %q %q; want 143 and the reason", pid, code, out, errOut)
	}
	if code, out, errOut := ctl("--machine", id, "ps"); code != 0 || !strings.Contains(out, "("+reason+")") {
		t.Errorf("ps after the archive: exit %d %q %q; want %s with the reason", code, out, errOut, pid)
	}

	pid2 := h.startDetached(ctx, "sleep", "600")
	if code, out, errOut := ctl("sandbox", "rm", id); code != 0 {
		t.Fatalf("sandbox rm: exit %d %q %q", code, out, errOut)
	}
	h.processRecord(id, pid2, "killed by KILL: sandbox deleted by "+actor)
}

// env rm of an environment whose sandboxes are running, stopped and
// archived: it says how many went, the stopped and archived ones
// counted; sandbox ls lists none of them any more; the archive's manifest
// and its blobs are released from the archive store (its GC runs after
// the delete).
func TestEnvRemoveArchivedSandboxes(t *testing.T) {
	st, err := archive.Open(t.Context(), (&url.URL{Scheme: "file", Path: t.TempDir()}).String(), archive.Options{Grace: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.WarmBuiltin, o.WarmCustom, o.Archive = 0, 0, st })
	ctl := h.agentctl()
	base, err := h.driver.Image(t.Context(), sandbox.BaseImage)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e, err := h.Store.CreateEnvironment(t.Context(), store.Environment{OrgID: h.Org.ID, Name: "keep", Image: "ghcr.io/acme/keep:1", Network: "none", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.FinishValidation(t.Context(), h.Org.ID, e.Name, e.Generation, store.Environment{State: store.EnvReady, Pinned: base.ID}, now); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, conv := range []string{"c-run", "c-stop", "c-arch"} {
		c := h.ctx("keep", conv)
		if _, code, err := h.run(c, "sh", "-c", "head -c 200000 /dev/urandom > /workspace/"+conv); err != nil || code != 0 {
			t.Fatalf("write in %s: exit %d %v", conv, code, err)
		}
		ids[conv] = h.sandboxOf(c)
	}
	if code, out, errOut := ctl("sandbox", "stop", ids["c-stop"]); code != 0 {
		t.Fatalf("sandbox stop: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := ctl("sandbox", "archive", ids["c-arch"]); code != 0 {
		t.Fatalf("sandbox archive: %d %q %q", code, out, errOut)
	}
	h.assertArchived(ids["c-arch"], st)
	if used, err := st.Usage(t.Context(), h.Org.ID); err != nil || used < 200000 {
		t.Fatalf("archive store usage before env rm: %d %v; want the archive's bytes", used, err)
	}

	code, out, errOut := ctl("env", "rm", "keep")
	want := "removed environment keep and 3 sandboxes (1 stopped, 1 archived): their workspaces and archives deleted\n"
	if code != 0 || out != want {
		t.Errorf("env rm keep: exit %d %q %q; want %q", code, out, errOut, want)
	}
	code, out, errOut = ctl("sandbox", "ls")
	for conv, id := range ids {
		if strings.Contains(out, id) {
			t.Errorf("sandbox ls after env rm lists %s's sandbox %s: exit %d %q %q", conv, id, code, out, errOut)
		}
	}
	pollUntil(t, 20*time.Second, "the archive and its blobs released", func() (bool, string) {
		used, err := st.Usage(t.Context(), h.Org.ID)
		ls := h.archives(st)
		return err == nil && used == 0 && len(ls) == 0, fmt.Sprintf("%d bytes, archives %v, %v", used, ls, err)
	})
	for _, id := range ids {
		if _, err := h.driver.Inspect(t.Context(), "agentd-"+id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("container of %s after env rm: %v, want gone", id, err)
		}
	}
	// Nothing left to remove: said too.
	if code, out, _ := ctl("env", "rm", "keep"); code == 0 {
		t.Errorf("env rm of a removed environment: exit 0 %q, want an error", out)
	}
}

// The idle policy's steps (paused, then stopped) end a detached process
// the same way: its record says "sandbox stopped: idle 4s".
func TestSandboxProcessEndedByIdlePolicy(t *testing.T) {
	h := startSandboxHub(t, func(o *sandboxes.Options) {
		o.WarmBuiltin, o.PauseAfter, o.StopAfter = 0, 2*time.Second, 4*time.Second
	})
	h.require(t, capPause)
	ctx := h.ctx("builtin", "c-idle-ended")
	pid := h.startDetached(ctx, "sleep", "600")
	id := h.sandboxOf(ctx)
	h.awaitState(id, store.SandboxStopped, sandbox.StateExited, 30*time.Second)
	h.processRecord(id, pid, "sandbox stopped: idle 4s")
	w, err := agentdv1.NewProcessServiceClient(h.cc).Wait(h.byID(id), &agentdv1.WaitRequest{Id: pid})
	if err != nil || w.GetProcess().GetExited().GetReason() != "sandbox stopped: idle 4s" {
		t.Errorf("wait for %s after the idle policy stopped its sandbox: %v %v", pid, w, err)
	}
}
