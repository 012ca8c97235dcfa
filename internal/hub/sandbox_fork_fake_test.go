package hub_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxfake"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// copyFailing is the fake driver whose CopyWorkspace fails from its
// failAt-th call on.
type copyFailing struct {
	*sandboxfake.Driver
	calls, failAt int32
}

func (d *copyFailing) CopyWorkspace(ctx context.Context, src, dst string) error {
	if n := atomic.AddInt32(&d.calls, 1); n >= d.failAt {
		return errors.New("copy failed (test)")
	}
	return d.Driver.CopyWorkspace(ctx, src, dst)
}

// A fork that fails half-way (the second of three copies) removes every
// fork it made — rows, containers, volumes — and leaves the source
// running, its workspace as it was.
func TestSandboxForkFailsHalfWay(t *testing.T) {
	var fd *copyFailing
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) {
		fd = &copyFailing{Driver: o.Driver.(*sandboxfake.Driver), failAt: 2}
		o.Driver = fd
	})
	st, err := agentdv1.NewProcessServiceClient(f.cc).Start(f.call("c-src"), &agentdv1.StartRequest{Argv: []string{"sh", "-c", "echo v1 > f"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	src, err := f.info("c-src")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.h.Store.ListSandboxes(t.Context(), f.h.Org.ID)
	_, err = hubv1.NewEnvironmentServiceClient(f.cc).ForkSandbox(f.call(""), &hubv1.ForkSandboxRequest{Id: src, Count: 3})
	if err == nil || status.Code(err) == codes.OK {
		t.Fatalf("fork with a failing copy: %v, want an error", err)
	}
	if fd.calls != 2 {
		t.Errorf("copies tried: %d, want 2 (the second failed)", fd.calls)
	}
	after, _ := f.h.Store.ListSandboxes(t.Context(), f.h.Org.ID)
	if len(after) != len(before) {
		t.Errorf("sandboxes after a failed fork: %d, want %d", len(after), len(before))
	}
	infos, _ := fd.List(t.Context(), map[string]string{sandbox.LabelManaged: "1"})
	vols, _ := fd.Volumes(t.Context(), map[string]string{sandbox.LabelManaged: "1"})
	if len(infos) != 1 || len(vols) != 1 || infos[0].Labels[sandbox.LabelID] != src {
		t.Errorf("containers %d, volumes %d after a failed fork; want the source's alone", len(infos), len(vols))
	}
	in, err := fd.Inspect(t.Context(), "agentd-"+src)
	if err != nil || in.State != sandbox.StateRunning {
		t.Errorf("the source after a failed fork: %+v %v, want running (unpaused)", in.State, err)
	}
}

// startGated is the fake driver whose Start, once armed, waits until want
// starts are under way together (or a while has passed, then fails), and
// fails the failAt-th of them (0: none).
type startGated struct {
	*sandboxfake.Driver
	armed           atomic.Bool
	want, failAt    int32
	n               atomic.Int32
	all             chan struct{}
	together, fails atomic.Int32
}

func (d *startGated) Start(ctx context.Context, id string) error {
	if !d.armed.Load() {
		return d.Driver.Start(ctx, id)
	}
	n := d.n.Add(1)
	if n == d.want {
		close(d.all)
	}
	select {
	case <-d.all:
		d.together.Add(1)
	case <-time.After(5 * time.Second):
		return errors.New("the forks' starts did not overlap (test)")
	}
	if n == d.failAt {
		d.fails.Add(1)
		return errors.New("start failed (test)")
	}
	return d.Driver.Start(ctx, id)
}

// A fork of three starts the three at once; when one of them fails to
// start, every fork is removed and the source runs on.
func TestSandboxForkStartsTogether(t *testing.T) {
	for _, failAt := range []int32{0, 2} {
		t.Run(fmt.Sprintf("failAt=%d", failAt), func(t *testing.T) {
			var fd *startGated
			f := startFakeSandboxHub(t, func(o *sandboxes.Options) {
				fd = &startGated{Driver: o.Driver.(*sandboxfake.Driver), want: 3, failAt: failAt, all: make(chan struct{})}
				o.Driver = fd
			})
			st, err := agentdv1.NewProcessServiceClient(f.cc).Start(f.call("c-src"), &agentdv1.StartRequest{Argv: []string{"true"}})
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := st.Recv(); err != nil {
					break
				}
			}
			src, err := f.info("c-src")
			if err != nil {
				t.Fatal(err)
			}
			before, _ := f.h.Store.ListSandboxes(t.Context(), f.h.Org.ID)
			fd.armed.Store(true)
			resp, err := hubv1.NewEnvironmentServiceClient(f.cc).ForkSandbox(f.call(""), &hubv1.ForkSandboxRequest{Id: src, Count: 3})
			if got := fd.together.Load(); got != 3 {
				t.Errorf("starts under way together: %d, want 3", got)
			}
			after, _ := f.h.Store.ListSandboxes(t.Context(), f.h.Org.ID)
			if failAt == 0 {
				if err != nil || len(resp.GetIds()) != 3 || len(after) != len(before)+3 {
					t.Fatalf("fork of 3: %v, ids %v, sandboxes %d (before %d)", err, resp.GetIds(), len(after), len(before))
				}
				return
			}
			if err == nil {
				t.Fatalf("fork with a failing start: ids %v, want an error", resp.GetIds())
			}
			if len(after) != len(before) {
				t.Errorf("sandboxes after a failed fork: %d, want %d", len(after), len(before))
			}
			infos, _ := fd.List(t.Context(), map[string]string{sandbox.LabelManaged: "1"})
			if len(infos) != 1 || infos[0].Labels[sandbox.LabelID] != src || infos[0].State != sandbox.StateRunning {
				t.Errorf("containers after a failed fork: %+v; want the source's alone, running", infos)
			}
		})
	}
}
