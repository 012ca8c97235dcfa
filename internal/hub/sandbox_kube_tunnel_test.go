package hub_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// The hub end to end on Kubernetes with Pods that need nothing from the
// hub's host but their workspace: agentd from the init container, the key
// and CA from a Secret, the tunnel over the cluster network to the hub's
// TLS listener on the node's bridge address (which Pods reach), under the
// NetworkPolicy that allows that address and port only. The Pod read back
// from the API has no hostPath volume; agentctl sh runs in it; a stop and
// the next call bring the sandbox back with its workspace. Skips without a
// cluster (docs/kubernetes.md: make k8s-up).
func TestKubeSandboxTunnelEndToEnd(t *testing.T) {
	cfg := os.Getenv("AGENTD_KUBECONFIG")
	if cfg == "" {
		cfg = os.Getenv("KUBECONFIG")
	}
	if cfg == "" || os.Geteuid() != 0 {
		t.Skip("no cluster (set AGENTD_KUBECONFIG after make k8s-up; root): docs/kubernetes.md")
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH (the export line make k8s-up prints)")
	}
	// The node's address on make k8s-up's bridge: this machine made it,
	// and the Pods reach it.
	lis, err := net.Listen("tcp", "10.213.0.1:0")
	if err != nil {
		t.Skipf("cannot listen on the cluster bridge's address 10.213.0.1 (make k8s-up makes it): %v", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "agentd-e2e-" + hex.EncodeToString(b)
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", cfg}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	kubectl("create", "namespace", ns)
	t.Cleanup(func() { kubectl("delete", "namespace", ns, "--wait=false") })
	dir := t.TempDir()
	drv, err := kube.New(kube.Options{Kubeconfig: cfg, Namespace: ns, HostPathDir: filepath.Join(dir, "ws"),
		AgentdImage: sandboxtest.KubeAgentdImage(t, cfg), HubAdvertise: lis.Addr().String(),
		// A start took 2.5-4 min while the shared cluster ran everyone's
		// tests (its containers are copies of their images: the native
		// snapshotter).
		StartTimeout: 8 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() }) // after the hub's own cleanup
	image := ""
	for _, ref := range []string{sandbox.BaseImage, "agentd-test/debian-slim:1"} {
		if img, err := drv.Image(t.Context(), ref); err == nil {
			image = img.ID
			break
		}
	}
	if image == "" {
		t.Skip("neither the sandbox base image nor agentd-test/debian-slim:1 is on the cluster (K8S_IMAGES of make k8s-up)")
	}
	pids, err := drv.PodPidsLimit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h := hubtest.Start(t, hubtest.Options{Sandboxes: sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: filepath.Join(dir, "socket"), BuiltinNetwork: "none",
		BaseImage: image, StartTimeout: 8 * time.Minute, Limits: sandbox.Limits{Pids: pids},
		TunnelListener: lis, TunnelDial: true,
	}})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	agentctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		code := ctl.Main(ctx, append([]string{"--hub", h.URL, "--token-file", tf, "--env", "builtin", "--conversation", "c-kube"}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	code, out, errOut := agentctl("sh", `echo "$(id -u) $(hostname)" && echo kept > /workspace/f && ls /run/agentd-key`)
	if code != 0 {
		t.Fatalf("agentctl sh: exit %d, %q %q", code, out, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "1000" || !strings.HasPrefix(f[1], "agentd-sb-") || f[2] != "hub-ca.pem" {
		t.Fatalf("agentctl sh: %q; want uid 1000, the Pod's hostname agentd-sb-… and only the CA left in the key dir", out)
	}
	pod := f[1]
	// Read back from the API: no hostPath volume at all (the workspace is
	// a claim), an init container of the agentd image.
	vols := kubectl("-n", ns, "get", "pod", pod, "-o", `jsonpath={range .spec.volumes[*]}{.name}={.hostPath.path}{"\n"}{end}`)
	for _, line := range strings.Fields(vols) {
		if name, path, _ := strings.Cut(line, "="); path != "" {
			t.Errorf("pod %s: volume %s is a hostPath (%s)", pod, name, path)
		}
	}
	if got := kubectl("-n", ns, "get", "pod", pod, "-o", "jsonpath={.spec.initContainers[0].image}"); !strings.HasPrefix(got, "agentd.local/agentd:") {
		t.Errorf("pod %s's init container image: %q", pod, got)
	}
	env, _ := base64.StdEncoding.DecodeString(kubectl("-n", ns, "get", "secret", pod, "-o", "jsonpath={.data.AGENTD_SANDBOX_HUB}"))
	if want := "wss://" + lis.Addr().String(); string(env) != want {
		t.Errorf("the sandbox's AGENTD_SANDBOX_HUB: %q; want %q", env, want)
	}
	if code, out, errOut := agentctl("sandbox", "stop", strings.TrimPrefix(pod, "agentd-")); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := agentctl("sh", "cat /workspace/f"); code != 0 || strings.TrimSpace(out) != "kept" {
		t.Errorf("after a stop, the next call: exit %d %q %q; want the workspace kept", code, out, errOut)
	}
}
