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
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// The hub end to end on Kubernetes: agentctl sh into a conversation's
// builtin sandbox runs in a Pod of the real cluster (uid 1000, the Pod's
// hostname), and a stop and the next call bring the same sandbox back with
// its workspace. Skips without a cluster (docs/kubernetes.md: make k8s-up).
func TestKubeSandboxEndToEnd(t *testing.T) {
	cfg := os.Getenv("AGENTD_KUBECONFIG")
	if cfg == "" {
		cfg = os.Getenv("KUBECONFIG")
	}
	if cfg == "" || os.Geteuid() != 0 {
		t.Skip("no cluster (set AGENTD_KUBECONFIG after make k8s-up; root): docs/kubernetes.md")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "agentd-e2e-" + hex.EncodeToString(b)
	kubectl := func(args ...string) {
		t.Helper()
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", cfg}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v: %s", args, err, out)
		}
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH (the export line make k8s-up prints)")
	}
	kubectl("create", "namespace", ns)
	t.Cleanup(func() { kubectl("delete", "namespace", ns, "--wait=false") })
	dir := t.TempDir()
	drv, err := kube.New(kube.Options{Kubeconfig: cfg, Namespace: ns, HostPathDir: filepath.Join(dir, "ws")})
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
	socketDir := filepath.Join(dir, "socket")
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the key dirs are below it
		t.Fatal(err)
	}
	h := hubtest.Start(t, hubtest.Options{Sandboxes: sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: socketDir, BuiltinNetwork: "none",
		BaseImage: image, StartTimeout: 2 * time.Minute,
		Limits: sandbox.Limits{Pids: pids},
	}})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	agentctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		code := ctl.Main(ctx, append([]string{"--hub", h.URL, "--token-file", tf, "--env", "builtin", "--conversation", "c-kube"}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	code, out, errOut := agentctl("sh", `echo "$(id -u) $(hostname)" && echo kept > /workspace/f`)
	if code != 0 {
		t.Fatalf("agentctl sh: exit %d, %q %q", code, out, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "1000" || !strings.HasPrefix(f[1], "agentd-sb-") {
		t.Fatalf("agentctl sh: %q; want uid 1000 and the Pod's hostname agentd-sb-…", out)
	}
	pod := f[1]
	kubectl("-n", ns, "get", "pod", pod) // it is a Pod of the cluster
	if code, out, errOut := agentctl("sandbox", "stop", strings.TrimPrefix(pod, "agentd-")); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := agentctl("sh", "cat /workspace/f"); code != 0 || strings.TrimSpace(out) != "kept" {
		t.Errorf("after a stop, the next call: exit %d %q %q; want the workspace kept", code, out, errOut)
	}
}
