package hub_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// A hub on a cluster whose CNI does not enforce NetworkPolicy (the shared
// cluster's enforcer stopped for the test) refuses a call into an
// environment of network public, naming the cause, and makes no sandbox;
// the builtin environment (network none) still runs. It stops the shared
// cluster's enforcer (scripts/k8s-netpol.sh stop, started again at the
// end), so it runs only with AGENTD_KUBE_NETPOL_OFF_TEST=1.
func TestKubePublicRefusedWithoutPolicy(t *testing.T) {
	cfg := os.Getenv("AGENTD_KUBECONFIG")
	if cfg == "" {
		cfg = os.Getenv("KUBECONFIG")
	}
	if cfg == "" || os.Geteuid() != 0 {
		t.Skip("no cluster (set AGENTD_KUBECONFIG after make k8s-up; root): docs/kubernetes.md")
	}
	if os.Getenv("AGENTD_KUBE_NETPOL_OFF_TEST") != "1" {
		t.Skip("stops the shared cluster's NetworkPolicy enforcer: run with AGENTD_KUBE_NETPOL_OFF_TEST=1")
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH (the export line make k8s-up prints)")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "agentd-e2e-np-" + hex.EncodeToString(b)
	if out, err := exec.Command("kubectl", "--kubeconfig", cfg, "create", "namespace", ns).CombinedOutput(); err != nil {
		t.Fatalf("create namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("kubectl", "--kubeconfig", cfg, "delete", "namespace", ns, "--wait=false").Run()
	})
	netpol := func(op string) {
		state := filepath.Dir(cfg)
		cmd := exec.Command("bash", "../../scripts/k8s-netpol.sh", op)
		cmd.Env = append(os.Environ(), "K8S_STATE="+state, "K8S_CACHE="+filepath.Dir(state))
		out, err := cmd.CombinedOutput()
		t.Logf("%s k8s-netpol.sh %s: %s", time.Now().UTC().Format(time.RFC3339), op, out)
		if err != nil {
			t.Fatalf("k8s-netpol.sh %s: %v", op, err)
		}
	}
	dir := t.TempDir()
	image := ""
	drv, err := kube.New(kube.Options{Kubeconfig: cfg, Namespace: ns, HostPathDir: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	for _, ref := range []string{sandbox.BaseImage, "agentd-test/debian-slim:1"} {
		if img, err := drv.Image(t.Context(), ref); err == nil {
			image = img.ID
			break
		}
	}
	if image == "" {
		t.Skip("neither the sandbox base image nor agentd-test/debian-slim:1 is on the cluster (K8S_IMAGES of make k8s-up)")
	}
	probeImage := image // the smaller image when the cluster has it: a busy node copies it faster
	if img, err := drv.Image(t.Context(), "agentd-test/debian-slim:1"); err == nil {
		probeImage = img.ID
	}
	drv.Close()
	drv, err = kube.New(kube.Options{Kubeconfig: cfg, Namespace: ns, HostPathDir: filepath.Join(dir, "ws"), ProbeImage: probeImage})
	if err != nil {
		t.Fatal(err)
	}
	pids, err := drv.PodPidsLimit(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	netpol("stop")
	t.Cleanup(func() { netpol("start") })
	guard := kube.NewPolicyGuard(drv, time.Hour)
	p, err := drv.ProbePolicy(t.Context())
	if err != nil || p.Enforced {
		t.Fatalf("probe with the enforcer stopped: %+v, %v; want not enforced", p, err)
	}
	t.Logf("probe: not enforced, took %v", p.Took)

	socketDir := filepath.Join(dir, "socket")
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := hubtest.Start(t, hubtest.Options{Sandboxes: sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: socketDir, BuiltinNetwork: "none",
		PublicNetwork: kube.NetworkPublic, Egress: guard,
		BaseImage: image, StartTimeout: 2 * time.Minute,
		Limits: sandbox.Limits{Pids: pids},
	}})
	now := time.Now()
	e, err := h.Store.CreateEnvironment(t.Context(), store.Environment{OrgID: h.Org.ID, Name: "pub", Image: image,
		Network: "public", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	// Validated as the hub's validator would mark it (no registry here).
	if _, err := h.Store.FinishValidation(t.Context(), h.Org.ID, "pub", e.Generation,
		store.Environment{State: store.EnvReady, Pinned: image}, now); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	agentctl := func(env string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		code := ctl.Main(ctx, append([]string{"--hub", h.URL, "--token-file", tf, "--env", env, "--conversation", "c-np"}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	code, out, errOut := agentctl("pub", "sh", "echo ran")
	if code == 0 || strings.Contains(out, "ran") || !strings.Contains(errOut, "does not enforce NetworkPolicy") {
		t.Errorf("a public environment on a cluster without policy: exit %d %q %q; want a refusal naming the cause", code, out, errOut)
	}
	t.Logf("the refusal: %s", strings.TrimSpace(errOut))
	if sbs, err := h.Store.ListSandboxes(t.Context(), ""); err != nil || len(sbs) != 0 {
		t.Errorf("sandboxes after the refusal: %+v, %v; want none", sbs, err)
	}
	if code, out, errOut := agentctl("builtin", "sh", "echo ran"); code != 0 || out != "ran\n" {
		t.Errorf("the builtin environment (network none): exit %d %q %q; want it to run", code, out, errOut)
	}
}
