package hub_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// A process that a stop ended is gone with its sandbox's agentd: attach
// to it after the sandbox is back says that the stop ended it, and why,
// instead of a bare "not found".
func TestSandboxAttachAfterStop(t *testing.T) {
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.WarmBuiltin = 0 })
	ctx := h.ctx("builtin", "c-ended")
	procs := agentdv1.NewProcessServiceClient(h.cc)
	st, err := procs.Start(ctx, &agentdv1.StartRequest{Argv: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || ev.GetEvent().GetStarted() == nil {
		t.Fatalf("start: %v %v", ev, err)
	}
	pid := ev.GetEvent().GetStarted().GetId()
	id := h.sandboxOf(ctx)
	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	if _, err := envs.ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: "stop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := envs.ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: "start"}); err != nil {
		t.Fatal(err)
	}
	at, err := procs.Attach(ctx, &agentdv1.AttachRequest{Id: pid})
	if err == nil {
		_, err = at.Recv()
	}
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "sandbox stopped") || !strings.Contains(err.Error(), "ended") {
		t.Errorf("attach to %s after a stop and start: %v; want NotFound saying the sandbox's stop ended it", pid, err)
	}
	// Another id is still refused as not found (the note says what the
	// stop ended, not that this one ran).
	at, err = procs.Attach(ctx, &agentdv1.AttachRequest{Id: "p-never"})
	if err == nil {
		_, err = at.Recv()
	}
	if status.Code(err) != codes.NotFound && status.Code(err) != codes.InvalidArgument {
		t.Errorf("attach to a process that never was: %v; want NotFound or InvalidArgument", err)
	}
}
