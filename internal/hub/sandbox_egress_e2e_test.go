package hub_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// fakeGuard stands in for egress.Guard (whose own test flushes real rules):
// Err is what the test sets, and each Tick is reported.
type fakeGuard struct {
	mu    sync.Mutex
	err   error
	ticks chan struct{}
}

func (g *fakeGuard) Tick(context.Context) {
	select {
	case g.ticks <- struct{}{}:
	default:
	}
}

func (g *fakeGuard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *fakeGuard) set(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
}

// While the egress guard says the rules are missing, calls to sandboxes on
// the public network are refused (FAILED_PRECONDITION saying why), by
// environment, by sandbox id, and for a new conversation (no sandbox is
// made); once the rules are back, the same sandbox is served again. The
// reaper ticks the guard. The "public" network is an internal Docker
// network the test makes (no route out).
func TestSandboxEgressGuardRefuses(t *testing.T) {
	network := fmt.Sprintf("agentd-test-guard-%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "network", "create", "--internal", network).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "network", "rm", network).CombinedOutput(); err != nil {
			t.Errorf("docker network rm %s: %v: %s", network, err, out)
		}
	})
	g := &fakeGuard{ticks: make(chan struct{}, 1)}
	h := startSandboxHub(t, func(o *sandboxes.Options) {
		o.PublicNetwork = network
		o.BuiltinNetwork = "public"
		o.StopAfter = 8 * time.Second // a reaper tick every 2 s
		o.Egress = g
	})
	sys := agentdv1.NewSystemServiceClient(h.cc)
	info, err := sys.Info(h.ctx("builtin", "c-1"), &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatalf("with the rules in place: %v", err)
	}
	sbID := info.GetTunnel().GetMachineId()
	byID := metadata.NewOutgoingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+h.Token, "agentd-machine", sbID))

	select {
	case <-g.ticks:
	case <-time.After(30 * time.Second):
		t.Fatal("the reaper never ticked the egress guard")
	}

	why := "the hub's egress rules for sandbox network " + network + " are missing (table inet agentd_x flushed?); calls to network sandboxes are refused until they are restored"
	g.set(errors.New(why))
	for name, ctx := range map[string]context.Context{
		"its conversation":   h.ctx("builtin", "c-1"),
		"by id":              byID,
		"a new conversation": h.ctx("builtin", "c-2"),
	} {
		_, err := sys.Info(ctx, &agentdv1.InfoRequest{})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), why) {
			t.Errorf("%s while the rules are missing: %v; want FAILED_PRECONDITION saying %q", name, err, why)
		}
	}
	sbs, err := h.Store.ListSandboxes(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 {
		t.Errorf("%d sandboxes; want only c-1's (none made while refused)", len(sbs))
	}

	g.set(nil)
	info, err = sys.Info(byID, &agentdv1.InfoRequest{})
	if err != nil || info.GetTunnel().GetMachineId() != sbID {
		t.Errorf("rules back, by id: %v (%s)", err, info.GetTunnel().GetMachineId())
	}
}

// agent run --image with a repository path that is not one ("..") is
// refused before the engine is asked (it was passed to the engine as is).
func TestAgentRunImagePathRefused(t *testing.T) {
	h := startSandboxHub(t, nil)
	run := h.agentctl()
	code, out, errs := run("agent", "run", "codex", "--image", "ghcr.io/../../etc/passwd:1", "--", "true")
	if code == 0 || !strings.Contains(errs, `repository path component ".."`) {
		t.Errorf("agent run --image ghcr.io/../../etc/passwd:1 = %d %q %q; want refused naming the '..' component", code, out, errs)
	}
	sbs, err := h.Store.ListSandboxes(t.Context(), "")
	if err != nil || len(sbs) != 0 {
		t.Errorf("sandboxes after the refusal: %v %v", sbs, err)
	}
}
