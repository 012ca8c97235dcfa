package hub_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// noFreezer is the fake driver without a freezer, as the Kubernetes
// driver is: Pause says sandbox.ErrNotSupported.
type noFreezer struct{ sandbox.Driver }

func (noFreezer) Pause(_ context.Context, id string) error {
	return fmt.Errorf("pause %s: %w", id, sandbox.ErrNotSupported)
}

// On an engine that cannot pause, pausing a sandbox (by request, as the
// idle policy does) stops it instead, its workspace kept, and says so; a
// call then starts it again, in the same sandbox.
func TestPauseStopsWhereTheEngineCannotPause(t *testing.T) {
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) { o.Driver = noFreezer{o.Driver} })
	envs := hubv1.NewEnvironmentServiceClient(f.cc)
	sb, err := f.info("c-1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := envs.ChangeSandboxState(f.call(""), &hubv1.ChangeSandboxStateRequest{Id: sb, Action: sandboxes.ActionPause})
	if err != nil {
		t.Fatalf("pause on an engine without a freezer: %v, want the sandbox stopped instead", err)
	}
	row, err := f.h.Store.Sandbox(t.Context(), sb)
	if err != nil || row.State != store.SandboxStopped {
		t.Fatalf("after pause: %+v, %v; want stopped", row, err)
	}
	if res.GetTo() != store.SandboxStopped {
		t.Errorf("pause answered to %q, want %q (what happened)", res.GetTo(), store.SandboxStopped)
	}
	if again, err := f.info("c-1"); err != nil || again != sb {
		t.Errorf("a call after the stop: %q %v; want sandbox %s running again", again, err, sb)
	}
}
