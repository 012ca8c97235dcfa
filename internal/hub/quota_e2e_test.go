//go:build linux

package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// An org and an API token get so many sandboxes and no more: the call
// that would make one more is refused with RESOURCE_EXHAUSTED naming the
// flag, the sandboxes there keep working, the warm pool does not count,
// and removing one makes room.
func TestSandboxCaps(t *testing.T) {
	h := startSandboxHub(t, func(o *sandboxes.Options) {
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
	if got, err := h.nanoCPUs(sb.ContainerID); err != nil || got != "1000000000" {
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
	// An agent run is a sandbox too: refused at once, before its image.
	_, err = hubv1.NewAgentServiceClient(h.cc).RunAgent(h.ctx("", ""), &hubv1.RunAgentRequest{Profile: "codex"})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--org-max-sandboxes 3") {
		t.Errorf("agent run at the org's cap: %v; want RESOURCE_EXHAUSTED naming --org-max-sandboxes", err)
	}

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

// A sandbox's /workspace holds the hub's size, or its environment's own,
// and no more: writing past it fails with ENOSPC in exec, env show says
// what bounds it, removing the sandbox frees the host's file and device.
func TestSandboxWorkspaceMax(t *testing.T) {
	var wsDir string // where the driver keeps the workspaces' images
	h := startSandboxHubOn(t, func(h *sandboxHub, o *sandboxes.Options) {
		if os.Geteuid() != 0 {
			t.Skip("bounded workspaces need root (loop devices)")
		}
		o.Limits.WorkspaceBytes, o.WorkspaceBound = 64<<20, "ext4 on loop"
		o.WarmBuiltin = 0
		if h.kube != nil {
			// The hostPath workspaces of the hub's own driver: a spec's
			// WorkspaceBytes makes them ext4 images, in a directory of
			// the namespace's name.
			wsDir = filepath.Join(h.kube.wsDir(), h.kube.ns)
			return
		}
		wsDir = t.TempDir()
		d, err := docker.New(docker.Options{WorkspaceDir: wsDir})
		if err != nil {
			t.Fatal(err)
		}
		// After the hub's own clean-up (removing the containers and
		// volumes): what a failed test left in wsDir is released.
		t.Cleanup(func() {
			if err := d.RecoverWorkspaces(context.Background()); err != nil {
				t.Errorf("release the test's workspaces: %v", err)
			}
			d.Close()
		})
		o.Driver = d
	})
	ctl := h.agentctl()
	if code, out, errOut := ctl("env", "show", "builtin"); code != 0 || !showsField(out, "workspace", "64 MiB, ext4 on loop") {
		t.Errorf("env show builtin: %d %q %q; want workspace: 64 MiB, ext4 on loop", code, out, errOut)
	}

	ctx := h.ctx("builtin", "w-1")
	out, code, err := h.run(ctx, "sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo written $(($(stat -c %s /workspace/big) >> 20))")
	if err != nil || !strings.Contains(out, "No space left on device") {
		t.Errorf("writing 100 MiB into a 64 MiB workspace: %q exit %d %v; want No space left on device", out, code, err)
	}
	imgs, _ := filepath.Glob(filepath.Join(wsDir, "*.img"))
	if len(imgs) != 1 {
		t.Fatalf("workspace images: %v; want one", imgs)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(imgs[0], &st); err != nil || st.Blocks*512 > 64<<20 {
		t.Errorf("the workspace's file takes %d bytes of the host's disk (%v); want at most 64 MiB", st.Blocks*512, err)
	}

	// An environment with its own, larger size.
	base, err := h.driver.Image(t.Context(), sandbox.BaseImage)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e, err := h.Store.CreateEnvironment(t.Context(), store.Environment{OrgID: h.Org.ID, Name: "big", Image: "ghcr.io/acme/big:1",
		Network: "none", CreatedAt: now, WorkspaceMax: 128 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.FinishValidation(t.Context(), h.Org.ID, e.Name, e.Generation, store.Environment{State: store.EnvReady, Pinned: base.ID}, now); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := ctl("env", "show", "big"); code != 0 || !showsField(out, "workspace", "128 MiB, ext4 on loop") {
		t.Errorf("env show big: %d %q %q; want workspace: 128 MiB, ext4 on loop", code, out, errOut)
	}
	out, _, err = h.run(h.ctx("big", "w-2"), "sh", "-c", "df -m /workspace | tail -1")
	var mib int
	if f := strings.Fields(out); len(f) > 1 {
		mib, _ = strconv.Atoi(f[1])
	}
	if err != nil || mib < 100 || mib > 128 {
		t.Errorf("df of the big environment's workspace: %q %v; want about 128 MiB", out, err)
	}
	// A size the hub refuses: said, and nothing made.
	if code, _, errOut := ctl("env", "create", "tiny", "--image", "ghcr.io/acme/tiny:1", "--workspace-max", "1MiB"); code == 0 || !strings.Contains(errOut, "want 64.0 MiB to") {
		t.Errorf("env create --workspace-max 1MiB: exit %d %q; want a refusal naming the range", code, errOut)
	}
	if code, _, errOut := ctl("env", "create", "tiny", "--image", "ghcr.io/acme/tiny:1", "--workspace-max", "lots"); code == 0 || !strings.Contains(errOut, "--workspace-max") {
		t.Errorf("env create --workspace-max lots: exit %d %q; want a usage error", code, errOut)
	}
	if _, err := h.Store.Environment(t.Context(), h.Org.ID, "tiny"); err == nil {
		t.Errorf("environment tiny was made")
	}

	// Removal frees the host: no image, no device link left.
	for _, sb := range h.listSandboxes() {
		if code, out, errOut := ctl("sandbox", "rm", sb.GetId()); code != 0 {
			t.Fatalf("sandbox rm %s: %d %q %q", sb.GetId(), code, out, errOut)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(wsDir, "*")); len(left) != 0 {
		t.Errorf("after sandbox rm: %v left in the workspace dir", left)
	}
}
