package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxfake"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// --org-max-sandboxes counts running and paused sandboxes, not stopped
// ones: with a cap of 2, a third conversation is refused until one is
// stopped; a paused one still counts; a stopped one whose start would pass
// the cap is refused (RESOURCE_EXHAUSTED naming the flag) and stays
// stopped. The fake driver: the caps are the point, not the engine.
func TestSandboxQuotaCountsRunningAndPaused(t *testing.T) {
	drv, err := sandboxfake.New(sandboxfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drv.Close(); err != nil {
			t.Errorf("close the fake driver: %v", err)
		}
	})
	drv.AddImage(sandbox.BaseImage, sandbox.Image{
		Labels: map[string]string{sandbox.LabelBaseMarker: sandbox.BaseContract},
		User:   sandbox.ContainerUser, Architecture: "amd64", OS: "linux", WorkingDir: sandbox.WorkspaceDir,
	})
	h := hubtest.Start(t, hubtest.Options{Sandboxes: sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: t.TempDir(), BuiltinNetwork: "none",
		StartTimeout: 60 * time.Second, OrgMaxSandboxes: 2,
	}})
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	call := func(conv string) context.Context {
		md := metadata.Pairs("authorization", "Bearer "+h.Token)
		if conv != "" {
			md = metadata.Join(md, metadata.Pairs("agentd-environment", "builtin", "agentd-conversation", conv))
		}
		return metadata.NewOutgoingContext(t.Context(), md)
	}
	info := func(conv string) (string, error) {
		in, err := agentdv1.NewSystemServiceClient(cc).Info(call(conv), &agentdv1.InfoRequest{})
		return in.GetTunnel().GetMachineId(), err
	}
	envs := hubv1.NewEnvironmentServiceClient(cc)
	change := func(id, action string) error {
		_, err := envs.ChangeSandboxState(call(""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: action})
		return err
	}
	sb1, err := info("c-1")
	if err != nil {
		t.Fatal(err)
	}
	sb2, err := info("c-2")
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--org-max-sandboxes 2") {
			t.Errorf("%s: %v; want RESOURCE_EXHAUSTED naming --org-max-sandboxes 2", what, err)
		}
	}
	_, err = info("c-3")
	refused("a third conversation with two running", err)

	if err := change(sb2, sandboxes.ActionPause); err != nil {
		t.Fatalf("pause: %v", err)
	}
	_, err = info("c-3")
	refused("a third conversation with one running and one paused", err)

	if err := change(sb2, sandboxes.ActionStop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := info("c-3"); err != nil {
		t.Fatalf("a third conversation once one is stopped: %v", err)
	}
	// c-2's stopped sandbox would be the third that counts.
	_, err = info("c-2")
	refused("a call for a stopped sandbox with two running", err)
	refused("sandbox start with two running", change(sb2, sandboxes.ActionStart))
	if sb, err := h.Store.Sandbox(t.Context(), sb2); err != nil || sb.State != store.SandboxStopped {
		t.Errorf("the refused sandbox: %+v %v; want stopped still", sb, err)
	}

	// One stopped by request: c-2 comes back, in the same sandbox.
	if err := change(sb1, sandboxes.ActionStop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if again, err := info("c-2"); err != nil || again != sb2 {
		t.Errorf("c-2 once there is room: %q %v; want its sandbox %s back", again, err, sb2)
	}
}
