package hub_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxfake"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// fakeSandboxHub is a hub whose sandboxes run on the fake driver (agentd
// as a host process), and how to call it.
type fakeSandboxHub struct {
	h    *hubtest.Hub
	drv  *sandboxfake.Driver
	cc   *grpc.ClientConn
	call func(conv string) context.Context // "": no environment
	info func(conv string) (string, error) // the conversation's sandbox id
}

func startFakeSandboxHub(t *testing.T, tune func(*sandboxes.Options)) *fakeSandboxHub {
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
	o := sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: t.TempDir(), BuiltinNetwork: "none",
		StartTimeout: 60 * time.Second,
	}
	if tune != nil {
		tune(&o)
	}
	h := hubtest.Start(t, hubtest.Options{Sandboxes: o})
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	f := &fakeSandboxHub{h: h, drv: drv, cc: cc}
	f.call = func(conv string) context.Context {
		md := metadata.Pairs("authorization", "Bearer "+h.Token)
		if conv != "" {
			md = metadata.Join(md, metadata.Pairs("agentd-environment", "builtin", "agentd-conversation", conv))
		}
		return metadata.NewOutgoingContext(t.Context(), md)
	}
	f.info = func(conv string) (string, error) {
		in, err := agentdv1.NewSystemServiceClient(cc).Info(f.call(conv), &agentdv1.InfoRequest{})
		return in.GetTunnel().GetMachineId(), err
	}
	return f
}

// --org-max-sandboxes counts running and paused sandboxes, not stopped
// ones: with a cap of 2, a third conversation is refused until one is
// stopped; a paused one still counts; a stopped one whose start would pass
// the cap is refused (RESOURCE_EXHAUSTED naming the flag) and stays
// stopped. The fake driver: the caps are the point, not the engine.
func TestSandboxQuotaCountsRunningAndPaused(t *testing.T) {
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) { o.OrgMaxSandboxes = 2 })
	h, cc, call, info := f.h, f.cc, f.call, f.info
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

// An environment's own policy goes over the hub's: with the hub pausing
// after 2 s, env set builtin --pause-after never --stop-after 10s makes an
// idle sandbox skip the pause and stop after 10 s; env show says the
// policy; bad input, a member, and an unknown environment change nothing.
func TestEnvSetPolicy(t *testing.T) {
	f := startFakeSandboxHub(t, func(o *sandboxes.Options) { o.PauseAfter = 2 * time.Second })
	h := f.h
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	agentctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := ctl.Main(t.Context(), append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	if code, out, _ := agentctl("env", "show", "builtin"); code != 0 || !strings.Contains(out, "pause after 2s, stop after 30m, archive after never, delete after never") {
		t.Errorf("env show builtin with the hub's policy: exit %d %q", code, out)
	}
	for _, args := range [][]string{
		{"env", "set", "builtin", "--stop-after", "5s"},
		{"env", "set", "builtin", "--delete-after", "forever"},
		{"env", "set", "builtin"},
		{"env", "set", "nope", "--stop-after", "1h"},
	} {
		if code, _, errOut := agentctl(args...); code == 0 || errOut == "" {
			t.Errorf("%v: exit %d %q; want refused, saying why", args, code, errOut)
		}
	}
	if p, err := h.Store.SandboxPolicy(t.Context(), h.Org.ID, "builtin"); err != nil || p != (store.Policy{}) {
		t.Errorf("policy after refused sets: %+v %v; want none", p, err)
	}
	code, out, errOut := agentctl("env", "set", "builtin", "--pause-after", "never", "--stop-after", "10s")
	if code != 0 || !strings.Contains(out, "pause after never, stop after 10s, archive after never, delete after never") {
		t.Fatalf("env set: exit %d %q %q", code, out, errOut)
	}
	if code, out, _ := agentctl("--json", "env", "show", "builtin"); code != 0 || !strings.Contains(out, `"pause_after":"never","stop_after":"10s","archive_after":"never","delete_after":"never"`) {
		t.Errorf("env show --json: exit %d %q", code, out)
	}

	id, err := f.info("c-1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // past the hub's 2 s pause: never paused
	if sb, _ := h.Store.Sandbox(t.Context(), id); sb.State != store.SandboxRunning {
		t.Errorf("4 s idle with pause-after never: %s (%s), want running", sb.State, sb.StateReason)
	}
	pollUntil(t, 20*time.Second, "the sandbox stopped after 10 s idle", func() (bool, string) {
		sb, err := h.Store.Sandbox(t.Context(), id)
		return err == nil && sb.State == store.SandboxStopped, fmt.Sprintf("%s (%s) %v", sb.State, sb.StateReason, err)
	})
	if sb, _ := h.Store.Sandbox(t.Context(), id); sb.StateReason != "idle 10s" {
		t.Errorf("stopped for %q, want idle 10s", sb.StateReason)
	}
	// Back to the hub's: the zero policy is no row.
	if code, _, errOut := agentctl("env", "set", "builtin", "--pause-after", "default", "--stop-after", "default"); code != 0 {
		t.Fatalf("env set default: %d %q", code, errOut)
	}
	if p, err := h.Store.SandboxPolicy(t.Context(), h.Org.ID, "builtin"); err != nil || p != (store.Policy{}) {
		t.Errorf("policy after default: %+v %v; want none", p, err)
	}

	// Changing the isolation replaces an environment's sandboxes, so
	// neither a bad policy value given with it nor the isolation it has
	// already may touch them.
	if code, _, errOut := agentctl("env", "set", "builtin", "--isolation", "gvisor", "--pause-after", "5x"); code == 0 || !strings.Contains(errOut, "5x") {
		t.Errorf("env set --isolation gvisor --pause-after 5x: exit %d %q; want refused for the value", code, errOut)
	}
	if code, _, errOut := agentctl("env", "set", "builtin", "--isolation", "runc"); code != 0 {
		t.Errorf("env set --isolation runc (as it is): exit %d %q", code, errOut)
	}
	if iso, err := h.Store.BuiltinIsolation(t.Context(), h.Org.ID); err != nil || iso != "runc" {
		t.Errorf("builtin's isolation after those: %q %v, want runc", iso, err)
	}
	if _, err := h.Store.Sandbox(t.Context(), id); err != nil {
		t.Errorf("the sandbox after env set with its own isolation: %v; want it kept", err)
	}
}
