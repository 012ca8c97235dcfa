package drivertest

// The contracts, one subtest each (see Run).

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Ping: the engine answers.
func (r *run) ping(t *testing.T) {
	if err := r.d.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// Image describes the harness's local image, and a missing one is
// ErrNotFound.
func (r *run) image(t *testing.T) {
	s := r.spec(t, Serve, nil)
	img, err := r.d.Image(t.Context(), s.Image)
	if err != nil {
		t.Fatalf("Image %s: %v", s.Image, err)
	}
	if img.ID == "" {
		t.Errorf("Image %s: no ID: %+v", s.Image, img)
	}
	// The id names the same image.
	if byID, err := r.d.Image(t.Context(), img.ID); err != nil || byID.ID != img.ID {
		t.Errorf("Image by its id %s: %+v, %v", img.ID, byID, err)
	}
	if _, err := r.d.Image(t.Context(), r.h.MissingImage); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Image of a missing image %s: %v, want ErrNotFound", r.h.MissingImage, err)
	}
}

// Pull fails for an image no registry has, and leaves it missing; it
// fetches the harness's pullable image, which Image then describes.
func (r *run) pull(t *testing.T) {
	if _, err := r.d.Pull(t.Context(), r.h.MissingImage); err == nil {
		t.Errorf("Pull of a missing image %s succeeded", r.h.MissingImage)
	}
	if _, err := r.d.Image(t.Context(), r.h.MissingImage); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Image after a failed Pull of %s: %v, want ErrNotFound", r.h.MissingImage, err)
	}
	if r.h.PullImage == "" {
		return
	}
	img, err := r.d.Pull(t.Context(), r.h.PullImage)
	if err != nil {
		t.Fatalf("Pull %s: %v", r.h.PullImage, err)
	}
	if img.ID == "" {
		t.Errorf("Pull %s: no ID: %+v", r.h.PullImage, img)
	}
	if local, err := r.d.Image(t.Context(), r.h.PullImage); err != nil || local.ID != img.ID {
		t.Errorf("Image after Pull %s: %+v, %v; want ID %s", r.h.PullImage, local, err, img.ID)
	}
}

// NotFound: a container that never was is ErrNotFound to Inspect, Start and
// Stop (errors.Is, whatever the wrapping); removing it is not an error.
func (r *run) notFound(t *testing.T) {
	ctx := t.Context()
	id := "agentd-dt-absent-" + randomHex(5)
	if _, err := r.d.Inspect(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Inspect of a missing container: %v, want ErrNotFound", err)
	}
	if err := r.d.Start(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Start of a missing container: %v, want ErrNotFound", err)
	}
	if err := r.d.Stop(ctx, id, time.Second); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stop of a missing container: %v, want ErrNotFound", err)
	}
	if err := r.d.Remove(ctx, id); err != nil {
		t.Errorf("Remove of a missing container: %v, want nil", err)
	}
	if err := r.d.RemoveVolume(ctx, id+"-volume"); err != nil {
		t.Errorf("RemoveVolume of a missing volume: %v, want nil", err)
	}
}

// Create makes the container without starting it, described by Inspect
// (by its id and by its name), and its workspace volume, both labelled.
func (r *run) createDoesNotStart(t *testing.T) {
	sb := r.create(t, Serve, nil)
	img, err := r.d.Image(t.Context(), sb.spec.Image)
	if err != nil {
		t.Fatalf("Image %s: %v", sb.spec.Image, err)
	}
	for _, ref := range []string{sb.id, sb.spec.Name} {
		in := r.inspect(t, ref)
		if in.State != sandbox.StateCreated || !in.StartedAt.IsZero() {
			t.Errorf("Inspect %s after Create: state %q, started %v; want created, never started", ref, in.State, in.StartedAt)
		}
		if in.ID != sb.id || in.Name != sb.spec.Name || in.Image != sb.spec.Image || in.ImageID != img.ID {
			t.Errorf("Inspect %s: id %q name %q image %q image id %q; want %q %q %q %q",
				ref, in.ID, in.Name, in.Image, in.ImageID, sb.id, sb.spec.Name, sb.spec.Image, img.ID)
		}
		if !hasLabels(in.Labels, sb.labels) {
			t.Errorf("Inspect %s: labels %v, want at least %v", ref, in.Labels, sb.labels)
		}
	}
	// Still not started a moment later: Create does not start it.
	time.Sleep(200 * time.Millisecond)
	if in := r.inspect(t, sb.id); in.State != sandbox.StateCreated {
		t.Errorf("Inspect 200ms after Create: state %q, want created", in.State)
	}
	vols, err := r.d.Volumes(t.Context(), map[string]string{sandbox.LabelID: sb.spec.Name})
	if err != nil {
		t.Fatalf("Volumes: %v", err)
	}
	if len(vols) != 1 || !hasLabels(vols[0].Labels, sb.labels) {
		t.Errorf("Volumes of the sandbox: %+v; want one workspace volume with labels %v", vols, sb.labels)
	}
}

// Start runs a created container: running, with a start time.
func (r *run) start(t *testing.T) {
	sb := r.create(t, Serve, nil)
	before := time.Now()
	if err := r.d.Start(t.Context(), sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	in := r.inspect(t, sb.id)
	if in.State != sandbox.StateRunning {
		t.Errorf("Inspect after Start: state %q, want running (%+v)", in.State, in)
	}
	// Engines keep their own clocks, rounded: a second's leeway.
	if in.StartedAt.Before(before.Add(-time.Second)) || in.StartedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("Inspect after Start: started at %v, want about %v", in.StartedAt, before)
	}
}

// A process that exits on its own leaves an exited container with its exit
// code.
func (r *run) exitInfo(t *testing.T) {
	sb := r.create(t, Exit3, nil)
	if err := r.d.Start(t.Context(), sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	in := r.await(t, sb.id, "the container to exit", func(in sandbox.Info) bool { return in.State == sandbox.StateExited })
	if in.ExitCode != 3 || in.OOMKilled || in.StartedAt.IsZero() {
		t.Errorf("Inspect after the process exited 3: exit code %d, oom %v, started %v; want 3, false, a start time",
			in.ExitCode, in.OOMKilled, in.StartedAt)
	}
}

// Stop sends SIGTERM: a process that exits on it stops the container long
// before the grace period ends. Stopping a stopped container is not an
// error.
func (r *run) stopTerm(t *testing.T) {
	sb := r.create(t, Serve, nil)
	if err := r.d.Start(t.Context(), sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	const grace = 30 * time.Second
	began := time.Now()
	if err := r.d.Stop(t.Context(), sb.id, grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(began); took > grace/2 {
		t.Errorf("Stop of a process that exits on SIGTERM took %v (grace %v): was SIGTERM sent?", took, grace)
	}
	if in := r.inspect(t, sb.id); in.State != sandbox.StateExited {
		t.Errorf("Inspect after Stop: state %q, want exited", in.State)
	}
	if err := r.d.Stop(t.Context(), sb.id, grace); err != nil {
		t.Errorf("Stop of a stopped container: %v, want nil", err)
	}
}

// Stop kills a process that ignores SIGTERM once the grace period is over,
// not before.
func (r *run) stopKill(t *testing.T) {
	sb := r.create(t, IgnoreTerm, nil)
	if err := r.d.Start(t.Context(), sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	r.await(t, sb.id, "the container to run", func(in sandbox.Info) bool { return in.State == sandbox.StateRunning })
	// Time for the process to set its signal handling up.
	time.Sleep(500 * time.Millisecond)
	const grace = 2 * time.Second // whole seconds: engines round up to them
	began := time.Now()
	if err := r.d.Stop(t.Context(), sb.id, grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	took := time.Since(began)
	if took < grace-100*time.Millisecond {
		t.Errorf("Stop of a process that ignores SIGTERM took %v, less than its grace %v", took, grace)
	}
	if took > grace+r.h.Timeout/2 {
		t.Errorf("Stop of a process that ignores SIGTERM took %v (grace %v): was it killed?", took, grace)
	}
	if in := r.inspect(t, sb.id); in.State != sandbox.StateExited {
		t.Errorf("Inspect after Stop: state %q, want exited", in.State)
	}
}

// A stopped container starts again (the hub's restart of a sandbox).
func (r *run) startAgain(t *testing.T) {
	sb := r.create(t, Serve, nil)
	ctx := t.Context()
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	first := r.inspect(t, sb.id).StartedAt
	if err := r.d.Stop(ctx, sb.id, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	in := r.inspect(t, sb.id)
	if in.State != sandbox.StateRunning || in.ID != sb.id {
		t.Errorf("Inspect after a second Start: state %q id %q, want running %q", in.State, in.ID, sb.id)
	}
	if in.StartedAt.Before(first) {
		t.Errorf("second start at %v, before the first at %v", in.StartedAt, first)
	}
}

// Pause freezes the container: a process that would have exited does not
// while it is paused, and exits once unpaused. Pausing or unpausing twice
// is not an error.
func (r *run) pauseUnpause(t *testing.T) {
	sb := r.create(t, ExitSoon, nil)
	ctx := t.Context()
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if r.h.CannotPause {
		r.pauseRefused(t, sb)
		return
	}
	if err := r.d.Pause(ctx, sb.id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := r.d.Pause(ctx, sb.id); err != nil {
		t.Errorf("Pause of a paused container: %v, want nil", err)
	}
	if in := r.inspect(t, sb.id); in.State != sandbox.StatePaused {
		t.Fatalf("Inspect after Pause: state %q, want paused", in.State)
	}
	// Past the process's two-second sleep: frozen, it has not exited.
	time.Sleep(3 * time.Second)
	if in := r.inspect(t, sb.id); in.State != sandbox.StatePaused {
		t.Fatalf("Inspect 3 s after Pause of a process that exits after 2 s: state %q (exit code %d), want paused", in.State, in.ExitCode)
	}
	if err := r.d.Unpause(ctx, sb.id); err != nil {
		t.Fatalf("Unpause: %v", err)
	}
	in := r.await(t, sb.id, "the unpaused container to exit", func(in sandbox.Info) bool { return in.State == sandbox.StateExited })
	if in.ExitCode != 0 {
		t.Errorf("exit code after Unpause: %d, want 0", in.ExitCode)
	}
}

// pauseRefused: an engine without a freezer refuses Pause of a running
// container with ErrNotSupported and leaves it running; Unpause of it is
// a no-op. The container (ExitSoon) then exits as it would have.
func (r *run) pauseRefused(t *testing.T, sb sandboxRef) {
	ctx := t.Context()
	if err := r.d.Pause(ctx, sb.id); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("Pause on an engine without a freezer: %v, want ErrNotSupported", err)
	}
	if in := r.inspect(t, sb.id); in.State != sandbox.StateRunning && in.State != sandbox.StateExited {
		t.Errorf("Inspect after a refused Pause: state %q, want running (or exited, its sleep over)", in.State)
	}
	if err := r.d.Unpause(ctx, sb.id); err != nil && r.inspect(t, sb.id).State == sandbox.StateRunning {
		t.Errorf("Unpause of a running container: %v, want nil", err)
	}
	in := r.await(t, sb.id, "the container to exit", func(in sandbox.Info) bool { return in.State == sandbox.StateExited })
	if in.ExitCode != 0 {
		t.Errorf("exit code after a refused Pause: %d, want 0", in.ExitCode)
	}
	t.Log("the engine cannot pause (Harness.CannotPause): the freeze itself is not tested")
}

// A container that does not run cannot be paused or unpaused; running,
// Unpause is a no-op.
func (r *run) pauseNotRunning(t *testing.T) {
	sb := r.create(t, Serve, nil)
	ctx := t.Context()
	if err := r.d.Pause(ctx, sb.id); err == nil {
		t.Errorf("Pause of a created container: nil error, want one")
	}
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := r.d.Unpause(ctx, sb.id); err != nil {
		t.Errorf("Unpause of a running container: %v, want nil", err)
	}
	if in := r.inspect(t, sb.id); in.State != sandbox.StateRunning {
		t.Errorf("Inspect after Unpause of a running container: state %q, want running", in.State)
	}
}

// Stop stops a paused container, within its grace period when its process
// exits on SIGTERM.
func (r *run) stopPaused(t *testing.T) {
	if r.h.CannotPause {
		t.Skip("the engine cannot pause (Harness.CannotPause): no paused container to stop")
	}
	sb := r.create(t, Serve, nil)
	ctx := t.Context()
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	r.await(t, sb.id, "the container to run", func(in sandbox.Info) bool { return in.State == sandbox.StateRunning })
	time.Sleep(500 * time.Millisecond) // time for its trap to be set
	if err := r.d.Pause(ctx, sb.id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := r.d.Stop(ctx, sb.id, 30*time.Second); err != nil {
		t.Fatalf("Stop of a paused container: %v", err)
	}
	if in := r.inspect(t, sb.id); in.State != sandbox.StateExited {
		t.Errorf("Inspect after Stop of a paused container: state %q, want exited", in.State)
	}
}

// Remove removes a running container and its workspace volume; removing
// it again is not an error.
func (r *run) remove(t *testing.T) {
	sb := r.create(t, Serve, nil)
	ctx := t.Context()
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := r.d.Remove(ctx, sb.id); err != nil {
		t.Fatalf("Remove of a running container: %v", err)
	}
	r.checkGone(t, sb)
	if err := r.d.Remove(ctx, sb.id); err != nil {
		t.Errorf("Remove of a removed container: %v, want nil", err)
	}
	if err := r.d.Remove(ctx, sb.spec.Name); err != nil {
		t.Errorf("Remove of a removed container by name: %v, want nil", err)
	}
}

// checkGone: the container and its volume are gone, to every method.
func (r *run) checkGone(t *testing.T, sb sandboxRef) {
	t.Helper()
	ctx := t.Context()
	if _, err := r.d.Inspect(ctx, sb.id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Inspect after Remove: %v, want ErrNotFound", err)
	}
	if err := r.d.Start(ctx, sb.id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Start after Remove: %v, want ErrNotFound", err)
	}
	only := map[string]string{sandbox.LabelID: sb.spec.Name}
	if infos, err := r.d.List(ctx, only); err != nil || len(infos) != 0 {
		t.Errorf("List after Remove: %+v, %v; want none", infos, err)
	}
	if vols, err := r.d.Volumes(ctx, only); err != nil || len(vols) != 0 {
		t.Errorf("Volumes after Remove: %+v, %v; want none (the workspace goes with its container)", vols, err)
	}
}

// Remove of a created (never started) and of an exited container.
func (r *run) removeGone(t *testing.T) {
	created := r.create(t, Serve, nil)
	if err := r.d.Remove(t.Context(), created.id); err != nil {
		t.Fatalf("Remove of a created container: %v", err)
	}
	r.checkGone(t, created)

	exited := r.create(t, Exit3, nil)
	if err := r.d.Start(t.Context(), exited.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	r.await(t, exited.id, "the container to exit", func(in sandbox.Info) bool { return in.State == sandbox.StateExited })
	if err := r.d.Remove(t.Context(), exited.id); err != nil {
		t.Fatalf("Remove of an exited container: %v", err)
	}
	r.checkGone(t, exited)
}

// List and Volumes return what carries every label asked for, in any
// state, and nothing else.
func (r *run) listFilter(t *testing.T) {
	group := "g-" + randomHex(4) // this subtest's own, beside the run's
	a := r.create(t, Serve, map[string]string{sandbox.LabelOrg: group, sandbox.LabelConv: "conv-a"})
	b := r.create(t, Serve, map[string]string{sandbox.LabelOrg: group, sandbox.LabelConv: "conv-b"})
	if err := r.d.Start(t.Context(), b.id); err != nil { // a created, b running
		t.Fatalf("Start: %v", err)
	}
	byName := func(t *testing.T, what string, labels map[string]string, want ...sandboxRef) {
		t.Helper()
		infos, err := r.d.List(t.Context(), labels)
		if err != nil {
			t.Fatalf("List %s: %v", what, err)
		}
		var got, wantNames []string
		for _, in := range infos {
			got = append(got, in.Name)
			if !hasLabels(in.Labels, labels) {
				t.Errorf("List %s: %s has labels %v", what, in.Name, in.Labels)
			}
		}
		for _, w := range want {
			wantNames = append(wantNames, w.spec.Name)
		}
		slices.Sort(got)
		slices.Sort(wantNames)
		if !slices.Equal(got, wantNames) {
			t.Errorf("List %s: %v, want %v", what, got, wantNames)
		}
		vols, err := r.d.Volumes(t.Context(), labels)
		if err != nil {
			t.Fatalf("Volumes %s: %v", what, err)
		}
		if len(vols) != len(want) {
			t.Errorf("Volumes %s: %+v, want %d", what, vols, len(want))
		}
		for _, v := range vols {
			if !hasLabels(v.Labels, labels) {
				t.Errorf("Volumes %s: %s has labels %v", what, v.Name, v.Labels)
			}
		}
	}
	org := map[string]string{sandbox.LabelHub: r.hub, sandbox.LabelOrg: group}
	byName(t, "by org", org, a, b)
	byName(t, "by org and conversation a", map[string]string{sandbox.LabelHub: r.hub, sandbox.LabelOrg: group, sandbox.LabelConv: "conv-a"}, a)
	byName(t, "by id b", map[string]string{sandbox.LabelID: b.spec.Name}, b)
	byName(t, "by org and an absent conversation", map[string]string{sandbox.LabelOrg: group, sandbox.LabelConv: "conv-c"})
	byName(t, "by an absent label", map[string]string{sandbox.LabelOrg: group, sandbox.LabelWarm: "1"})
	byName(t, "by another hub", map[string]string{sandbox.LabelHub: r.hub + "-other", sandbox.LabelOrg: group})
}

// RemoveVolume refuses a volume a container still uses, and removing a
// gone volume is not an error.
func (r *run) removeVolume(t *testing.T) {
	sb := r.create(t, Serve, nil)
	ctx := t.Context()
	only := map[string]string{sandbox.LabelID: sb.spec.Name}
	vols, err := r.d.Volumes(ctx, only)
	if err != nil || len(vols) != 1 {
		t.Fatalf("Volumes of the sandbox: %+v, %v; want one", vols, err)
	}
	vol := vols[0].Name
	if err := r.d.RemoveVolume(ctx, vol); err == nil {
		t.Errorf("RemoveVolume of the workspace of a created container succeeded")
	}
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := r.d.RemoveVolume(ctx, vol); err == nil {
		t.Errorf("RemoveVolume of the workspace of a running container succeeded")
	}
	if vols, err := r.d.Volumes(ctx, only); err != nil || len(vols) != 1 {
		t.Errorf("Volumes after a refused RemoveVolume: %+v, %v; want the volume still there", vols, err)
	}
	if err := r.d.Remove(ctx, sb.id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := r.d.RemoveVolume(ctx, vol); err != nil {
		t.Errorf("RemoveVolume of a removed volume: %v, want nil", err)
	}
}

// The workspace is the sandbox user's before anything runs in it.
func (r *run) workspaceOwned(t *testing.T) {
	sb := r.create(t, WorkspaceOwned, nil)
	if err := r.d.Start(t.Context(), sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	in := r.await(t, sb.id, "the check to finish", func(in sandbox.Info) bool { return in.State == sandbox.StateExited })
	if in.ExitCode != 0 {
		t.Errorf("the workspace is not the sandbox user's: the check exited %d (%s)", in.ExitCode, in.Error)
	}
}

// Stats: a container that does not run gives an empty sample (zero Read, no
// error), a running one its memory (> 0), processes (> 0) and, where the
// driver enforces them, the spec's memory limit and a pids limit no lower
// than the spec's; a missing one is ErrNotFound.
func (r *run) stats(t *testing.T) {
	ctx := t.Context()
	if _, err := r.d.Stats(ctx, "agentd-dt-absent-"+randomHex(5)); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stats of a missing container: %v, want ErrNotFound", err)
	}
	sb := r.create(t, Serve, nil)
	if s, err := r.d.Stats(ctx, sb.id); err != nil || s != (sandbox.Stats{}) {
		t.Errorf("Stats of a created container: %+v, %v; want an empty sample, nil", s, err)
	}
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	s, err := r.d.Stats(ctx, sb.id)
	if err != nil {
		t.Fatalf("Stats of a running container: %v", err)
	}
	if s.Read.IsZero() || s.MemoryBytes <= 0 || s.Pids <= 0 {
		t.Errorf("Stats of a running container: %+v; want a read time, memory > 0, pids > 0", s)
	}
	// A runtime's own tasks may count against the pids limit, which then
	// has room for them (gVisor's sentry on Docker): at least the spec's.
	switch {
	case !r.h.EnforcesLimits && (s.MemoryLimit != 0 || s.PidsLimit != 0):
		t.Errorf("Stats limits: memory %d, pids %d; want 0, 0 (the driver enforces none)", s.MemoryLimit, s.PidsLimit)
	case r.h.EnforcesLimits && (s.MemoryLimit != sb.spec.Limits.MemoryBytes || s.PidsLimit < sb.spec.Limits.Pids):
		t.Errorf("Stats limits: memory %d, pids %d; want the spec's memory, pids at least the spec's (%+v)",
			s.MemoryLimit, s.PidsLimit, sb.spec.Limits)
	}
	if err := r.d.Stop(ctx, sb.id, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if s, err := r.d.Stats(ctx, sb.id); err != nil || !s.Read.IsZero() {
		t.Errorf("Stats of a stopped container: %+v, %v; want an empty sample, nil", s, err)
	}
}

// CopyWorkspace: a created container gets a copy of another's workspace,
// content, modes, symlinks and times; a container given no copy fails the
// same check (so the check can fail); a write in one copy does not show in
// the source or in a second copy made afterwards.
func (r *run) copyWorkspace(t *testing.T) {
	ctx := t.Context()
	exited := func(in sandbox.Info) bool { return in.State == sandbox.StateExited }
	src := r.create(t, WriteTree, nil)
	if err := r.d.Start(ctx, src.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if in := r.await(t, src.id, "the tree to be written", exited); in.ExitCode != 0 {
		t.Fatalf("writing the tree exited %d (%s)", in.ExitCode, in.Error)
	}
	check := func(name string, copyFirst bool, want int) {
		t.Helper()
		sb := r.create(t, CheckTree, nil)
		if copyFirst {
			if err := r.d.CopyWorkspace(ctx, src.id, sb.id); err != nil {
				t.Fatalf("%s: CopyWorkspace: %v", name, err)
			}
		}
		if err := r.d.Start(ctx, sb.id); err != nil {
			t.Fatalf("%s: Start: %v", name, err)
		}
		if in := r.await(t, sb.id, name, exited); in.ExitCode != want {
			t.Errorf("%s: the check exited %d, want %d (%s)", name, in.ExitCode, want, in.Error)
		}
	}
	check("a container given no copy", false, 1)
	check("the first copy", true, 0)
	// The first copy wrote fork-only into its own workspace: the second
	// copy, of the source, must not have it.
	check("a second copy after the first wrote", true, 0)
}

// CopyWorkspace refuses a destination that has started, and a missing
// container with ErrNotFound.
func (r *run) copyRefused(t *testing.T) {
	ctx := t.Context()
	src := r.create(t, Serve, nil)
	dst := r.create(t, Serve, nil)
	if err := r.d.CopyWorkspace(ctx, src.id, "agentd-dt-absent-"+randomHex(5)); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("CopyWorkspace to a missing container: %v, want ErrNotFound", err)
	}
	if err := r.d.CopyWorkspace(ctx, "agentd-dt-absent-"+randomHex(5), dst.id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("CopyWorkspace from a missing container: %v, want ErrNotFound", err)
	}
	if err := r.d.Start(ctx, dst.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	r.await(t, dst.id, "the destination to run", func(in sandbox.Info) bool { return in.State == sandbox.StateRunning })
	if err := r.d.CopyWorkspace(ctx, src.id, dst.id); err == nil {
		t.Errorf("CopyWorkspace into a running container: nil, want an error")
	}
	if err := r.d.Stop(ctx, dst.id, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// wsEntry is one entry of a workspace stream, as the round trip compares it.
type wsEntry struct {
	Type    byte
	Mode    int64
	ModTime time.Time
	Data    string // a file's content, a symlink's target
}

// workspaceTar is a snapshot export stream of a small tree: nested
// directories, files of several modes, an empty file, a symlink.
func workspaceTar(t *testing.T) ([]byte, map[string]wsEntry) {
	t.Helper()
	mt := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	want := map[string]wsEntry{
		"src":            {Type: tar.TypeDir, Mode: 0o755, ModTime: mt},
		"src/main.go":    {Type: tar.TypeReg, Mode: 0o644, ModTime: mt.Add(time.Hour), Data: "package main\n"},
		"src/run.sh":     {Type: tar.TypeReg, Mode: 0o755, ModTime: mt.Add(2 * time.Hour), Data: "#!/bin/sh\necho hi\n"},
		"src/empty":      {Type: tar.TypeReg, Mode: 0o600, ModTime: mt, Data: ""},
		"src/deep":       {Type: tar.TypeDir, Mode: 0o700, ModTime: mt.Add(-time.Hour)},
		"src/deep/x.bin": {Type: tar.TypeReg, Mode: 0o640, ModTime: mt, Data: strings.Repeat("\x00\xff", 40000)},
		"link":           {Type: tar.TypeSymlink, Mode: 0o777, ModTime: mt, Data: "src/main.go"},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(want)) {
		e := want[name]
		hdr := &tar.Header{Typeflag: e.Type, Name: name, Mode: e.Mode, ModTime: e.ModTime, Format: tar.FormatPAX}
		switch e.Type {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			hdr.Linkname = e.Data
		case tar.TypeReg:
			hdr.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), want
}

// readWorkspace reads a workspace stream into entries.
func readWorkspace(t *testing.T, r io.Reader) map[string]wsEntry {
	t.Helper()
	got := map[string]wsEntry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("read the exported workspace: %v", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if strings.HasPrefix(name, "/") || strings.HasPrefix(name, "workspace/") || name == "." || name == "" {
			t.Errorf("exported entry %q: want a path relative to the workspace", hdr.Name)
		}
		e := wsEntry{Type: hdr.Typeflag, Mode: hdr.Mode & 0o7777, ModTime: hdr.ModTime.UTC().Truncate(time.Second)}
		switch hdr.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			e.Data = string(b)
		case tar.TypeSymlink:
			e.Data, e.Mode, e.ModTime = hdr.Linkname, 0o777, time.Time{}
		}
		got[name] = e
	}
}

// The workspace round trip: a stream imported into a created container is
// what its workspace exports, after the container ran and stopped too
// (paths, types, modes, modification times, contents, symlink targets);
// exporting a missing container is ErrNotFound, and a cut stream fails
// the import.
func (r *run) workspaceRoundTrip(t *testing.T) {
	ctx := t.Context()
	data, want := workspaceTar(t)
	for k, e := range want {
		if e.Type == tar.TypeSymlink {
			e.Mode, e.ModTime = 0o777, time.Time{}
			want[k] = e
		}
	}
	sb := r.create(t, Serve, nil)
	if err := r.d.ImportWorkspace(ctx, sb.id, bytes.NewReader(data)); err != nil {
		t.Fatalf("ImportWorkspace: %v", err)
	}
	export := func(what string) {
		t.Helper()
		rc, err := r.d.ExportWorkspace(ctx, sb.id)
		if err != nil {
			t.Fatalf("ExportWorkspace %s: %v", what, err)
		}
		defer rc.Close()
		if diff := cmp.Diff(readWorkspace(t, rc), want); diff != "" {
			t.Errorf("the workspace %s (-got +want):\n%s", what, diff)
		}
	}
	export("of a created container")
	if err := r.d.Start(ctx, sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	r.await(t, sb.id, "the container to run", func(in sandbox.Info) bool { return in.State == sandbox.StateRunning })
	if err := r.d.Stop(ctx, sb.id, 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	export("of a stopped container")
	if _, err := r.d.ExportWorkspace(ctx, "agentd-dt-absent-"+randomHex(5)); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("ExportWorkspace of a missing container: %v, want ErrNotFound", err)
	}
	// A cut stream fails the import.
	other := r.create(t, Serve, nil)
	if err := r.d.ImportWorkspace(ctx, other.id, bytes.NewReader(data[:len(data)-1024])); err == nil {
		t.Error("ImportWorkspace of a stream without its end marker: nil error")
	}
}
