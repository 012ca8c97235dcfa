package hub_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// An org and an API token get so many sandboxes and no more: the call
// that would make one more is refused with RESOURCE_EXHAUSTED naming the
// flag, the sandboxes there keep working, the warm pool does not count,
// and removing one makes room.
func TestSandboxCaps(t *testing.T) {
	h := startSandboxHub(t, func(o *hub.SandboxOptions) {
		o.OrgMaxSandboxes, o.TokenMaxSandboxes = 3, 2
		o.WarmBuiltin = 1
		// The default CPU limit on a 2-CPU host: 1, not 2.
		o.Limits.CPUs, o.HostCPUs = 0, 2
	})
	secret, hash := store.NewToken()
	if _, err := h.Store.CreateToken(t.Context(), store.Token{OrgID: h.Org.ID, Name: "second", Role: store.RoleMember, Hash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	second := func(conv string) context.Context {
		return metadata.NewOutgoingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+secret,
			"agentd-environment", "builtin", "agentd-conversation", conv))
	}
	info := func(ctx context.Context) (string, error) {
		r, err := agentdv1.NewSystemServiceClient(h.cc).Info(ctx, &agentdv1.InfoRequest{})
		return r.GetTunnel().GetMachineId(), err
	}
	refused := func(ctx context.Context, flag string) {
		t.Helper()
		_, err := info(ctx)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), flag) {
			t.Fatalf("a sandbox past the cap: %v; want RESOURCE_EXHAUSTED naming %s", err, flag)
		}
	}

	first, err := info(h.ctx("builtin", "c-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := info(h.ctx("builtin", "c-2")); err != nil {
		t.Fatal(err)
	}
	sb, err := h.Store.Sandbox(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "docker", "inspect", "-f", "{{.HostConfig.NanoCpus}}", sb.ContainerID).Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != "1000000000" {
		t.Errorf("the sandbox's CPU limit on a 2-CPU host: %q nano-CPUs (%v); want 1000000000", got, err)
	}
	refused(h.ctx("builtin", "c-3"), "--token-max-sandboxes 2")
	// The token's sandboxes still answer.
	if id, err := info(h.ctx("builtin", "c-1")); err != nil || id != first {
		t.Errorf("c-1 after the refusal: %s %v; want %s", id, err, first)
	}
	// Another token of the org: one more, then the org's cap.
	if _, err := info(second("d-1")); err != nil {
		t.Fatal(err)
	}
	refused(second("d-2"), "--org-max-sandboxes 3")

	// Removing one makes room; the warm sandbox the hub kept meanwhile was
	// never counted.
	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	if _, err := envs.RemoveSandbox(h.ctx("", ""), &hubv1.RemoveSandboxRequest{Id: first}); err != nil {
		t.Fatal(err)
	}
	if _, err := info(second("d-2")); err != nil {
		t.Errorf("after sandbox rm: %v", err)
	}
	sbs, err := h.Store.ListSandboxes(t.Context(), h.Org.ID)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]int{}
	for _, sb := range sbs {
		if !sb.Warm {
			tokens[sb.Token]++
		}
	}
	if len(tokens) != 2 {
		t.Errorf("sandboxes by token: %v; want two tokens' (the admin's c-2, the second's d-1 and d-2)", tokens)
	}
}
