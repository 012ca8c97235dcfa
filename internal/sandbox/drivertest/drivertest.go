// Package drivertest is the conformance suite of sandbox.Driver: every
// driver (Docker, the in-memory fake, a Kubernetes one) runs it from its own
// tests, the way containerd's snapshotters run its testsuite.
//
// Each subtest is one contract the interface's doc comments state, and only
// those: Ping answers; Image and Pull report a missing image (ErrNotFound,
// matched with errors.Is); Create makes a container that is not started, with
// its workspace volume, both carrying the spec's labels; Start runs it;
// Inspect describes it (state, name, image, labels, start time, exit code);
// Stop sends SIGTERM and SIGKILL after the grace period, and a stopped
// container starts again; Pause freezes a running container (its process
// does not run on until Unpause; twice is not an error; a container that
// does not run cannot be paused) and Stop stops a paused one — or, for an
// engine without a freezer (Harness.CannotPause), Pause says
// sandbox.ErrNotSupported and changes nothing; Remove removes the container and its workspace
// volume, and removing what is gone is not an error; List and Volumes filter
// by every label given; RemoveVolume of a gone volume is not an error, of a
// volume in use is; the workspace is the sandbox user's before anything runs;
// Stats of a running container reports memory, processes and its limits, of
// one that does not run an empty sample, of a missing one ErrNotFound;
// CopyWorkspace gives a created container a copy of another's workspace
// (content, modes, symlinks, times) that its writes do not reach back
// into, and refuses a destination that runs or a missing container.
// ImportWorkspace into a created container and ExportWorkspace of a
// created or stopped one give back the same tree (paths, modes, times,
// contents, symlinks), and a cut stream fails the import. A workspace of
// Limits.WorkspaceBytes (Harness.WorkspaceBytes) fails writes past it
// with ENOSPC, and the driver goes on.
// What one engine does beyond that (Docker's hardening, its helper
// container, its image labels) stays in that driver's own tests.
//
// The suite knows no engine: a Harness gives it the driver and says how the
// driver's sandboxes run a few behaviours (Behaviour), since what a
// container can run depends on the engine and its images. Every sandbox the
// suite makes carries a label unique to the run (sandbox.LabelHub
// "drivertest-…") and is removed by id when its test ends; a last sweep
// removes whatever carries the run's label, so a run leaves nothing behind.
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Behaviour is what a sandbox's process does, in terms the suite can
// observe through the Driver alone.
type Behaviour int

// Behaviours a Harness runs.
const (
	// Serve runs until it gets SIGTERM, then exits 0 at once.
	Serve Behaviour = iota
	// IgnoreTerm ignores SIGTERM and runs until killed.
	IgnoreTerm
	// Exit3 exits with code 3 at once.
	Exit3
	// WorkspaceOwned exits 0 when the workspace (sandbox.WorkspaceDir) is
	// the sandbox user's, uid 1000 owning it and able to write there, and
	// 1 when it is not.
	WorkspaceOwned
	// ExitSoon sleeps for two seconds, then exits 0: a paused container
	// is seen not to run (it outlives its sleep, paused).
	ExitSoon
	// WriteTree writes a small tree into the workspace and exits 0: d/f
	// holding "one" with mode 0640 and modification time TreeMtime, and
	// l, a symlink to d/f.
	WriteTree
	// CheckTree exits 0 when the workspace holds what WriteTree wrote and
	// no file "fork-only", which it then creates; 1 otherwise.
	CheckTree
	// FillWorkspace writes twice Harness.WorkspaceBytes into the
	// workspace and exits 0 when the write failed with ENOSPC ("No space
	// left on device") after at least half the bound was written, 1 when
	// it did not fail, 2 when it failed otherwise.
	FillWorkspace
)

// TreeMtime is d/f's modification time as WriteTree sets it (Unix
// seconds; 2020-01-02 03:04:05 UTC).
const TreeMtime = 1577934245

func (b Behaviour) String() string {
	switch b {
	case Serve:
		return "serve"
	case IgnoreTerm:
		return "ignore SIGTERM"
	case Exit3:
		return "exit 3"
	case WorkspaceOwned:
		return "check the workspace's owner"
	case ExitSoon:
		return "exit 0 after two seconds"
	case WriteTree:
		return "write a tree into the workspace"
	case CheckTree:
		return "check the tree in the workspace"
	case FillWorkspace:
		return "write past the workspace's bound"
	}
	return "unknown behaviour"
}

// Harness is what the suite needs of one driver.
type Harness struct {
	// Driver is the driver under test. Required.
	Driver sandbox.Driver
	// Spec returns a spec whose process does b, or false when the driver
	// cannot run b (its subtest is skipped, saying so). The suite sets
	// Name and Labels; everything else is the harness's (a local Image,
	// Cmd, Network, Limits). Required.
	Spec func(t *testing.T, b Behaviour) (sandbox.Spec, bool)
	// MissingImage is a reference that is neither local nor pullable.
	// Required.
	MissingImage string
	// PullImage is a reference Pull can fetch; "": Pull's success is not
	// tested.
	PullImage string
	// EnforcesLimits: the driver carries out a spec's memory and pids
	// limits, and Stats reports them; false: Stats's limits are 0.
	EnforcesLimits bool
	// CannotPause: the engine has no freezer (Kubernetes). Pause of a
	// running container then returns sandbox.ErrNotSupported and leaves
	// it running, Unpause of a running one is a no-op, and the contracts
	// of a paused container (PauseUnpause's freeze, StopPaused) are
	// skipped, saying so; the caller stops instead of pausing.
	CannotPause bool
	// WorkspaceBytes, when set, is a workspace size the driver bounds
	// (Limits.WorkspaceBytes): the WorkspaceBound contract gives a sandbox
	// that size and has it write past it. 0: the contract is skipped.
	WorkspaceBytes int64
	// Timeout bounds each wait of the suite (a start, an exit). Default
	// one minute.
	Timeout time.Duration
}

// run is one run of the suite.
type run struct {
	h   Harness
	d   sandbox.Driver
	hub string // the run's sandbox.LabelHub value
}

// Run runs the suite against the driver newHarness returns (called once).
// Subtests run in parallel: drivers are safe for concurrent use.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	h := newHarness(t)
	if h.Driver == nil || h.Spec == nil || h.MissingImage == "" {
		t.Fatal("drivertest: the harness needs a Driver, a Spec and a MissingImage")
	}
	if h.Timeout <= 0 {
		h.Timeout = time.Minute
	}
	r := &run{h: h, d: h.Driver, hub: "drivertest-" + randomHex(6)}
	// Registered first, so it runs last, after every subtest's removals.
	t.Cleanup(r.sweep(t))

	t.Run("group", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    func(*testing.T)
		}{
			{"Ping", r.ping},
			{"Image", r.image},
			{"Pull", r.pull},
			{"NotFound", r.notFound},
			{"CreateDoesNotStart", r.createDoesNotStart},
			{"Start", r.start},
			{"ExitInfo", r.exitInfo},
			{"StopSIGTERM", r.stopTerm},
			{"StopSIGKILLAfterGrace", r.stopKill},
			{"StartAgain", r.startAgain},
			{"PauseUnpause", r.pauseUnpause},
			{"PauseNotRunning", r.pauseNotRunning},
			{"StopPaused", r.stopPaused},
			{"Remove", r.remove},
			{"RemoveGone", r.removeGone},
			{"ListAndVolumesFilter", r.listFilter},
			{"RemoveVolume", r.removeVolume},
			{"WorkspaceOwned", r.workspaceOwned},
			{"Stats", r.stats},
			{"CopyWorkspace", r.copyWorkspace},
			{"CopyWorkspaceRefused", r.copyRefused},
			{"WorkspaceRoundTrip", r.workspaceRoundTrip},
			{"WorkspaceBound", r.workspaceBound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.f(t)
			})
		}
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cleanupContext is for removals in t.Cleanup, when t.Context is done.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

// sweep removes, by id and by name, every container and volume that carries
// the run's label, and fails the test for each it found: a subtest's own
// cleanup should have removed them.
func (r *run) sweep(t *testing.T) func() {
	return func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		mine := map[string]string{sandbox.LabelHub: r.hub}
		infos, err := r.d.List(ctx, mine)
		if err != nil {
			t.Errorf("sweep: List: %v", err)
		}
		for _, in := range infos {
			t.Errorf("sweep: container %s (%s) was left behind", in.Name, in.ID)
			if err := r.d.Remove(ctx, in.ID); err != nil {
				t.Errorf("sweep: Remove %s: %v", in.ID, err)
			}
		}
		vols, err := r.d.Volumes(ctx, mine)
		if err != nil {
			t.Errorf("sweep: Volumes: %v", err)
		}
		for _, v := range vols {
			t.Errorf("sweep: volume %s was left behind", v.Name)
			if err := r.d.RemoveVolume(ctx, v.Name); err != nil {
				t.Errorf("sweep: RemoveVolume %s: %v", v.Name, err)
			}
		}
	}
}

// sandboxRef is a sandbox the suite made.
type sandboxRef struct {
	id     string
	spec   sandbox.Spec
	labels map[string]string
}

// spec is the harness's spec for b with a new name and the run's labels
// (extra added); it skips the test when the harness cannot run b.
func (r *run) spec(t *testing.T, b Behaviour, extra map[string]string) sandbox.Spec {
	t.Helper()
	s, ok := r.h.Spec(t, b)
	if !ok {
		t.Skipf("the harness cannot run a sandbox that does %q", b)
	}
	s.Name = "agentd-dt-" + randomHex(5)
	s.Labels = map[string]string{
		sandbox.LabelManaged: "1",
		sandbox.LabelHub:     r.hub,
		sandbox.LabelID:      s.Name,
	}
	maps.Copy(s.Labels, extra)
	return s
}

// create creates a sandbox doing b and removes it, by id, when the test
// ends.
func (r *run) create(t *testing.T, b Behaviour, extra map[string]string) sandboxRef {
	t.Helper()
	return r.createSpec(t, r.spec(t, b, extra))
}

// createSpec creates a sandbox of spec s (from spec) and removes it, by
// id, when the test ends.
func (r *run) createSpec(t *testing.T, s sandbox.Spec) sandboxRef {
	t.Helper()
	id, err := r.d.Create(t.Context(), s)
	if err != nil {
		t.Fatalf("Create %s (%s): %v", s.Name, s.Cmd, err)
	}
	if id == "" {
		t.Fatalf("Create %s: an empty id", s.Name)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := r.d.Remove(ctx, id); err != nil {
			t.Errorf("cleanup: Remove %s: %v", id, err)
		}
	})
	return sandboxRef{id: id, spec: s, labels: s.Labels}
}

// inspect is Inspect that fails the test on an error.
func (r *run) inspect(t *testing.T, id string) sandbox.Info {
	t.Helper()
	in, err := r.d.Inspect(t.Context(), id)
	if err != nil {
		t.Fatalf("Inspect %s: %v", id, err)
	}
	return in
}

// await polls Inspect until cond holds, failing the test after the
// harness's timeout.
func (r *run) await(t *testing.T, id, what string, cond func(sandbox.Info) bool) sandbox.Info {
	t.Helper()
	deadline := time.Now().Add(r.h.Timeout)
	for {
		in := r.inspect(t, id)
		if cond(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last Inspect: %+v", what, r.h.Timeout, in)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		}
	}
}

// hasLabels reports whether got carries every label of want.
func hasLabels(got, want map[string]string) bool {
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			return false
		}
	}
	return true
}
