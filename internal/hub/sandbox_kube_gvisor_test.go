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

// A gVisor environment on Kubernetes: with the builtin environment set to
// isolation gvisor (agentctl env set, as a person would), agentctl sh runs
// in a Pod of the cluster's gVisor RuntimeClass on gVisor's kernel (dmesg
// says so), agentd inside it reaching the hub's unix socket; after a stop
// the next call brings it back with its workspace. Skips without a cluster
// or without a RuntimeClass whose handler is runsc (make k8s-up makes
// RuntimeClass gvisor unless K8S_GVISOR=0; docs/kubernetes.md).
func TestKubeGVisorEndToEnd(t *testing.T) {
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
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", cfg}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	classes := kubectl("get", "runtimeclass", "-o", `jsonpath={range .items[?(@.handler=="runsc")]}{.metadata.name}{"\n"}{end}`)
	if strings.TrimSpace(classes) == "" {
		t.Skip("the cluster has no RuntimeClass with handler runsc: make k8s-up creates RuntimeClass gvisor (gVisor's shim from tools/gvisor) unless K8S_GVISOR=0")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "agentd-e2e-gv-" + hex.EncodeToString(b)
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
		BaseImage: image, StartTimeout: 3 * time.Minute,
		Limits: sandbox.Limits{Pids: pids},
	}})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	agentctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
		defer cancel()
		code := ctl.Main(ctx, append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	if code, out, errOut := agentctl("env", "set", "builtin", "--isolation", sandbox.IsolationGVisor); code != 0 {
		t.Fatalf("env set builtin --isolation gvisor: exit %d %q %q", code, out, errOut)
	}
	sh := func(script string) (int, string, string) {
		return agentctl("--env", "builtin", "--conversation", "c-kube-gv", "sh", script)
	}
	t0 := time.Now()
	code, out, errOut := sh(`dmesg 2>&1 | head -n 1; echo "$(id -u) $(hostname)" && echo kept > /workspace/f`)
	if code != 0 {
		t.Fatalf("agentctl sh: exit %d, %q %q", code, out, errOut)
	}
	t.Logf("first call (the Pod made and started under gVisor): %v", time.Since(t0).Round(time.Millisecond))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "gVisor") {
		t.Fatalf("agentctl sh: %q; want gVisor's dmesg line, then uid and hostname", out)
	}
	f := strings.Fields(lines[1])
	if len(f) != 2 || f[0] != "1000" || !strings.HasPrefix(f[1], "agentd-sb-") {
		t.Fatalf("agentctl sh: %q; want uid 1000 and the Pod's hostname agentd-sb-…", lines[1])
	}
	pod := f[1]
	rc := kubectl("-n", ns, "get", "pod", pod, "-o", "jsonpath={.spec.runtimeClassName}")
	if !strings.Contains(classes, rc) || rc == "" {
		t.Errorf("the Pod's runtimeClassName = %q, want one of the gVisor classes %q", rc, classes)
	}
	if code, out, errOut := agentctl("sandbox", "stop", strings.TrimPrefix(pod, "agentd-")); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	t0 = time.Now()
	if code, out, errOut := sh("cat /workspace/f; dmesg 2>&1 | head -n 1"); code != 0 || !strings.HasPrefix(out, "kept\n") || !strings.Contains(out, "gVisor") {
		t.Errorf("after a stop, the next call: exit %d %q %q; want the workspace kept, under gVisor", code, out, errOut)
	}
	t.Logf("the call after a stop (a new Pod): %v", time.Since(t0).Round(time.Millisecond))
}
