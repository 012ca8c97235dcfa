package hub_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
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
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// sandboxHub is a real hub running sandboxes on this machine's Docker
// engine (or a Kubernetes cluster: sandbox_driver_e2e_test.go), with the
// static agentd built from this tree.
type sandboxHub struct {
	*hubtest.Hub
	t      *testing.T
	driver sandbox.Driver
	opts   sandboxes.Options // as the hub got them
	kube   *kubeDriverHub    // on Kubernetes (nil: Docker)
	// engineCut is the driver cut off from the engine that cutEngine
	// made, which the hub may run on instead of driver.
	engineCut *engineCut
	cc        *grpc.ClientConn
}

func startSandboxHub(t *testing.T, tune func(*sandboxes.Options)) *sandboxHub {
	t.Helper()
	return startSandboxHubWith(t, tune, hubtest.Options{})
}

// startSandboxHubWith is startSandboxHub with the hub's other options
// (its Sandboxes are set here).
func startSandboxHubWith(t *testing.T, tune func(*sandboxes.Options), ho hubtest.Options) *sandboxHub {
	t.Helper()
	var tuneOn func(*sandboxHub, *sandboxes.Options)
	if tune != nil {
		tuneOn = func(_ *sandboxHub, o *sandboxes.Options) { tune(o) }
	}
	return startSandboxHubTuned(t, tuneOn, ho)
}

// startSandboxHubTuned is startSandboxHubWith whose tune gets the
// sandboxHub too (startSandboxHubOn).
func startSandboxHubTuned(t *testing.T, tune func(*sandboxHub, *sandboxes.Options), ho hubtest.Options) *sandboxHub {
	t.Helper()
	var (
		drv sandbox.Driver
		o   sandboxes.Options
		k   *kubeDriverHub
	)
	if onKube() {
		k = startKube(t) // skips without a cluster
		drv, o = k.drv, k.options(sandboxtest.AgentdBinary(t))
	} else {
		base := sandboxtest.BaseImage(t) // skips without an engine
		_ = base
		d, err := docker.New(docker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		drv = d
		o = sandboxes.Options{
			Driver:         drv,
			AgentdDir:      sandboxtest.AgentdBinary(t),
			SocketDir:      t.TempDir(),
			BuiltinNetwork: "none", // egress has its own tests; these need no network
			StartTimeout:   60 * time.Second,
			Limits:         sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 256, TmpBytes: 64 << 20, HomeBytes: 64 << 20},
		}
	}
	sh := &sandboxHub{t: t, driver: drv, opts: o, kube: k}
	if tune != nil {
		tune(sh, &o)
		sh.opts = o
	}
	if o.Driver != drv && (sh.engineCut == nil || o.Driver != sh.engineCut.drv) {
		// The test brought its own driver (a Docker one, with options
		// of its own): on Kubernetes that would run on Docker instead.
		sh.require(t, capEngine)
	}
	if o.PublicNetwork != "" || o.BuiltinNetwork == "public" {
		sh.require(t, capNetwork)
	}
	if k != nil && o.Limits.Pids != k.pids {
		sh.require(t, capLimits)
	}
	ho.Sandboxes = o
	h := hubtest.Start(t, ho)
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	sh.Hub, sh.cc = h, cc
	hubID := o.HubID
	if hubID == "" {
		secret, err := h.Store.ServerSecret(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		hubID = sandboxes.DefaultHubID(secret)
	}
	// Whatever a test leaves, its containers go with it: once the hub has
	// stopped (this runs before hubtest's own stop), so that no warm-pool
	// fill makes one after the list (TestSandboxCaps left one, 1 run in 3).
	// Those of this hub go whether or not a row names them: a warm-pool
	// sandbox whose removal failed while the hub closed has no row left,
	// and each CI run used to leave one behind.
	t.Cleanup(func() {
		h.Stop()
		ctx := context.Background()
		infos, _ := drv.List(ctx, map[string]string{sandbox.LabelManaged: "1"})
		sbs, _ := h.Store.ListSandboxes(ctx, "")
		mine := map[string]bool{}
		for _, sb := range sbs {
			mine[sb.ID] = true
		}
		for _, in := range infos {
			switch {
			case mine[in.Labels[sandbox.LabelID]]:
			case in.Labels[sandbox.LabelHub] == hubID:
				t.Logf("removing container %s of this hub that no sandbox row names (%s)", in.ID, in.Labels[sandbox.LabelID])
			default:
				continue
			}
			_ = drv.Remove(ctx, in.ID)
		}
	})
	return sh
}

// isolations runs body once per isolation (sandboxtest.Isolations), each
// on a hub of its own whose built-in environment has that isolation (set
// with agentctl env set, as a person would); gVisor skips, saying why, on
// an engine without its runtimes.
func isolations(t *testing.T, tune func(*sandboxes.Options), body func(t *testing.T, iso string, h *sandboxHub)) {
	for _, iso := range sandboxtest.Isolations {
		t.Run(iso, func(t *testing.T) {
			if !onKube() {
				sandboxtest.RequireIsolation(t, iso)
			}
			h := startSandboxHub(t, tune)
			if iso == sandbox.IsolationGVisor {
				h.require(t, capGVisor)
			}
			if code, out, errs := h.agentctl()("env", "set", "builtin", "--isolation", iso); code != 0 {
				t.Fatalf("env set builtin --isolation %s = %d %q %q", iso, code, out, errs)
			}
			body(t, iso, h)
		})
	}
}

// checkKernel fails t unless the sandbox of ctx runs on iso's kernel:
// gVisor's says so in dmesg (and uname -r is its own, 4.4.0), the host's
// does not let uid 1000 read its ring buffer.
func (h *sandboxHub) checkKernel(t *testing.T, ctx context.Context, iso string) {
	t.Helper()
	out, _, err := h.run(ctx, "sh", "-c", "dmesg 2>&1 | head -1")
	if err != nil {
		t.Fatalf("dmesg: %v", err)
	}
	if got := strings.Contains(out, "gVisor"); got != (iso == sandbox.IsolationGVisor) {
		t.Errorf("dmesg in a %s sandbox: %q (gVisor's kernel: %v)", iso, out, got)
	}
}

// agentctl returns a function that runs agentctl in-process against the
// hub as its admin: exit code, stdout, stderr.
func (h *sandboxHub) agentctl() func(args ...string) (int, string, string) {
	tf := filepath.Join(h.t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := ctl.Main(h.t.Context(), append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
}

// ctx is the admin's context routed by environment and conversation.
func (h *sandboxHub) ctx(env, conv string) context.Context {
	md := metadata.Pairs("authorization", "Bearer "+h.Token)
	if env != "" {
		md.Set("agentd-environment", env)
	}
	if conv != "" {
		md.Set("agentd-conversation", conv)
	}
	return metadata.NewOutgoingContext(h.t.Context(), md)
}

// run runs argv in the environment's sandbox for conv; stdout and exit code.
func (h *sandboxHub) run(ctx context.Context, argv ...string) (string, int32, error) {
	st, err := agentdv1.NewProcessServiceClient(h.cc).Start(ctx, &agentdv1.StartRequest{Argv: argv})
	if err != nil {
		return "", 0, err
	}
	var out strings.Builder
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out.String(), 0, errors.New("no exit event")
		}
		if err != nil {
			return out.String(), 0, err
		}
		if o := r.GetEvent().GetOutput(); o != nil {
			out.Write(o.GetData())
		}
		if x := r.GetEvent().GetExited(); x != nil {
			return out.String(), x.GetExitCode(), nil
		}
	}
}

// The built-in environment: a conversation's first call creates its
// sandbox (agentd in sandbox mode, uid 1000, /workspace), later calls and
// --machine sb-… reach the same one, another conversation gets another,
// removing it deletes the container and its workspace volume.
func TestSandboxBuiltin(t *testing.T) {
	isolations(t, nil, sandboxBuiltin)
}

func sandboxBuiltin(t *testing.T, iso string, h *sandboxHub) {
	ctx := h.ctx("builtin", "c-1")
	info, err := agentdv1.NewSystemServiceClient(h.cc).Info(ctx, &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetMode() != "sandbox" || info.GetEnvironment() != "builtin" || info.GetUid() != 1000 || info.GetWorkspace() != "/workspace" || info.GetImage() == "" {
		t.Errorf("info: mode %q env %q uid %d workspace %q image %q; want sandbox builtin 1000 /workspace and an image",
			info.GetMode(), info.GetEnvironment(), info.GetUid(), info.GetWorkspace(), info.GetImage())
	}
	sbID := info.GetTunnel().GetMachineId()
	if !strings.HasPrefix(sbID, "sb-") {
		t.Fatalf("sandbox id %q", sbID)
	}
	h.checkKernel(t, ctx, iso)
	if info.GetIsolation() != iso {
		t.Errorf("info: isolation %q, want %s", info.GetIsolation(), iso)
	}
	// The platform is the one the engine runs gVisor with (runc: none).
	rts, err := h.driver.Runtimes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantPlatform := ""
	if iso == sandbox.IsolationGVisor {
		wantPlatform = sandbox.Platform(rts[sandbox.RuntimeGVisor])
	}
	// On Kubernetes the platform is the node's runsc configuration, which
	// a RuntimeClass does not show: the hub knows none, and says none.
	if info.GetPlatform() != wantPlatform || (iso == sandbox.IsolationGVisor && wantPlatform == "" && h.kube == nil) {
		t.Errorf("info: platform %q, want %q (the runtime's --platform)", info.GetPlatform(), wantPlatform)
	}
	out, code, err := h.run(ctx, "sh", "-c", "echo hi > /workspace/f && cat /workspace/f && touch /etc/x 2>/dev/null || echo ro")
	if err != nil || code != 0 || out != "hi\nro\n" {
		t.Errorf("run: %q exit %d err %v; want hi, ro", out, code, err)
	}
	// Commands get the image's environment (its ENV, as PID 1 got it), not
	// a login shell's: Debian's /etc/profile would reset PATH and drop the
	// base image's ~/.local/bin, where pip puts what the agent installs.
	// On Kubernetes PID 1 is the Pod's pause process (no image ENV) and
	// agentd is not readable: the PATH alone is checked there.
	out, _, err = h.run(ctx, "sh", "-c", `echo "PATH=$PATH"; tr '\0' '\n' </proc/1/environ | grep '^PATH='`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if h.kube != nil && len(lines) > 0 {
		lines = []string{lines[0], lines[0]}
	}
	if err != nil || len(lines) != 2 || lines[0] != lines[1] || !strings.Contains(lines[0], "/home/agent/.local/bin") {
		t.Errorf("PATH in the sandbox, then the image's: %q (%v); want the same two, with /home/agent/.local/bin", out, err)
	}
	// The same conversation: the same sandbox, its files still there.
	out, _, err = h.run(h.ctx("builtin", "c-1"), "cat", "/workspace/f")
	if err != nil || out != "hi\n" {
		t.Errorf("second call: %q %v", out, err)
	}
	// By id, like a machine.
	byID := metadata.NewOutgoingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+h.Token, "agentd-machine", sbID))
	if out, _, err := h.run(byID, "cat", "/workspace/f"); err != nil || out != "hi\n" {
		t.Errorf("--machine %s: %q %v", sbID, out, err)
	}
	// Another conversation: another sandbox, an empty workspace.
	info2, err := agentdv1.NewSystemServiceClient(h.cc).Info(h.ctx("builtin", "c-2"), &agentdv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info2.GetTunnel().GetMachineId() == sbID {
		t.Errorf("conversation c-2 got c-1's sandbox")
	}
	// No environment named: the org's default, builtin.
	if _, err := agentdv1.NewSystemServiceClient(h.cc).Info(h.ctx("", "c-1"), &agentdv1.InfoRequest{}); err != nil {
		t.Errorf("default environment: %v", err)
	}

	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	list, err := envs.ListSandboxes(h.ctx("", ""), &hubv1.ListSandboxesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetSandboxes()); n != 2 {
		t.Errorf("%d sandboxes listed, want 2: %v", n, list.GetSandboxes())
	}
	machines, err := hubv1.NewAdminServiceClient(h.cc).ListMachines(h.ctx("", ""), &hubv1.ListMachinesRequest{})
	if err != nil || len(machines.GetMachines()) != 0 {
		t.Errorf("machines lists sandboxes: %v %v", machines.GetMachines(), err)
	}
	sb, err := h.Store.Sandbox(t.Context(), sbID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envs.RemoveSandbox(h.ctx("", ""), &hubv1.RemoveSandboxRequest{Id: sbID}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.driver.Inspect(t.Context(), sb.ContainerID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("container after rm: %v, want ErrNotFound", err)
	}
	if _, _, err := h.run(byID, "true"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("call to a removed sandbox: %v, want FailedPrecondition (revoked)", err)
	}
	if _, err := envs.RemoveSandbox(h.ctx("", ""), &hubv1.RemoveSandboxRequest{Id: sbID}); status.Code(err) != codes.NotFound {
		t.Errorf("rm twice: %v, want NotFound", err)
	}
}

// agentctl against a hub with sandboxes: the environment flags, the
// conformance suite in a sandbox (its container checks included), and the
// env and sandbox listings.
func TestSandboxAgentctl(t *testing.T) {
	isolations(t, nil, sandboxAgentctl)
}

func sandboxAgentctl(t *testing.T, iso string, h *sandboxHub) {
	run := h.agentctl()
	if code, out, errs := run("--env", "builtin", "--conversation", "c-1", "sh", "id -u; echo oops >&2; exit 3"); code != 3 || out != "1000\n" || errs != "oops\n" {
		t.Errorf("sh in the builtin sandbox = %d %q %q, want 3 '1000' 'oops'", code, out, errs)
	}
	// exec's own --env with a bare NAME is the environment.
	if code, out, errs := run("--conversation", "c-1", "exec", "--env", "builtin", "-e", "X=1", "--", "sh", "-c", "echo $X"); code != 0 || out != "1\n" {
		t.Errorf("exec --env builtin = %d %q %q", code, out, errs)
	}
	code, out, errs := run("--env", "builtin", "--conversation", "c-1", "validate")
	if code != 0 {
		t.Errorf("validate in a sandbox failed:\n%s%s", out, errs)
	}
	for _, want := range []string{"write", "read", "edit", "search", "shell", "pty", "python", "python session", "snapshot",
		"sandbox uid", "read-only root", "writable workspace", "writable /tmp"} {
		if !strings.Contains(out, "PASS  "+want) {
			t.Errorf("validate in a sandbox: no PASS %s line:\n%s", want, out)
		}
	}
	if code, out, _ := run("env", "ls"); code != 0 || !strings.Contains(out, "builtin  builtin  ready  *        "+iso) {
		t.Errorf("env ls = %d\n%s", code, out)
	}
	if code, out, _ := run("--env", "builtin", "--conversation", "c-1", "info"); code != 0 || !regexp.MustCompile(`(?m)^isolation:\s+`+iso+`( \(platform \w+\))?$`).MatchString(out) {
		t.Errorf("info in the sandbox = %d\n%s", code, out)
	}
	if code, out, _ := run("env", "show", "builtin"); code != 0 || !showsField(out, "isolation", iso) {
		t.Errorf("env show builtin = %d\n%s", code, out)
	}
	if code, out, _ := run("sandbox", "ls"); code != 0 || !strings.Contains(out, " c-1 ") || !strings.Contains(out, "running") {
		t.Errorf("sandbox ls = %d\n%s", code, out)
	}
	if code, _, errs := run("--env", "nosuch", "--conversation", "c-1", "sh", "true"); code != 125 || !strings.Contains(errs, "environment nosuch not found") {
		t.Errorf("an unknown environment = %d %q", code, errs)
	}
}
