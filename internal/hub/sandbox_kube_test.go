package hub_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// The hub end to end on Kubernetes: agentctl sh into a conversation's
// builtin sandbox runs in a Pod of the real cluster (uid 1000, the Pod's
// hostname), and a stop and the next call bring the same sandbox back with
// its workspace. Skips without a cluster (docs/kubernetes.md: make k8s-up).
func TestKubeSandboxEndToEnd(t *testing.T) {
	k := startKubeHub(t, 0)
	agentctl := func(args ...string) (int, string, string) { return k.agentctl("c-kube", args...) }
	kubectl, ns := k.kubectl, k.ns
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
	// Running, with an unbounded workspace: no fork (nothing to freeze).
	if code, out, errOut := k.agentctl("", "sandbox", "fork", strings.TrimPrefix(pod, "agentd-")); code == 0 || !strings.Contains(errOut, "stop the sandbox first") {
		t.Errorf("fork of a running sandbox with an unbounded workspace: exit %d %q %q; want a refusal saying to stop it first", code, out, errOut)
	}
}

// Fork of a running sandbox on Kubernetes, its workspace bounded (an ext4
// image, frozen for the copy): the fork holds what the source wrote
// before, writes after it are not shared either way, and the source's
// process runs on with its state (a counter in its memory-backed /tmp goes
// on from where it was, same pid).
func TestKubeForkRunning(t *testing.T) {
	k := startKubeHub(t, 64<<20)
	code, out, errOut := k.agentctl("c-src", "sh", `echo before > /workspace/f && `+
		`setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.1; done' </dev/null >/dev/null 2>&1 & `+
		`echo "$! $(hostname)"`)
	f := strings.Fields(out)
	if code != 0 || len(f) != 2 {
		t.Fatalf("start the source's process: exit %d %q %q", code, out, errOut)
	}
	pid, src := f[0], strings.TrimPrefix(f[1], "agentd-")
	counter := func() int {
		t.Helper()
		code, out, errOut := k.agentctl("c-src", "sh", "kill -0 "+pid+" && cat /tmp/c")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if code != 0 || err != nil {
			t.Fatalf("the source's process %s: exit %d %q %q", pid, code, out, errOut)
		}
		return n
	}
	c0 := counter()
	start := time.Now()
	code, out, errOut = k.agentctl("", "sandbox", "fork", src)
	if code != 0 || !strings.HasPrefix(out, "sb-") {
		t.Fatalf("sandbox fork of the running source: exit %d %q %q", code, out, errOut)
	}
	t.Logf("fork of a running sandbox (its start included): %s", time.Since(start))
	fork := strings.TrimSpace(out)
	sb, err := k.h.Store.Sandbox(t.Context(), fork)
	if err != nil {
		t.Fatal(err)
	}
	if c1 := counter(); c1 <= c0 {
		t.Errorf("the source's counter went from %d to %d across the fork: its process did not run on", c0, c1)
	}
	if code, out, errOut := k.agentctl(sb.Conversation, "sh", "cat /workspace/f && echo fork > /workspace/g"); code != 0 || out != "before\n" {
		t.Errorf("the fork's workspace: exit %d %q %q; want the file written before the fork", code, out, errOut)
	}
	if code, out, errOut := k.agentctl("c-src", "sh", "[ ! -e /workspace/g ] && echo after > /workspace/h && echo ok"); code != 0 || out != "ok\n" {
		t.Errorf("the source after the fork: exit %d %q %q; want the fork's write not there", code, out, errOut)
	}
	if code, out, errOut := k.agentctl(sb.Conversation, "sh", "[ ! -e /workspace/h ] && echo ok"); code != 0 || out != "ok\n" {
		t.Errorf("the fork after the source wrote: exit %d %q %q; want the source's write not there", code, out, errOut)
	}
	counter()
}

// kubeHub is a hub whose sandboxes are Pods of a namespace of its own on
// the real cluster.
type kubeHub struct {
	h       *hubtest.Hub
	ns      string
	drv     *kube.Driver
	kubectl func(args ...string) string
	tf      string
}

// agentctl runs agentctl against the hub in the builtin environment's
// conversation conv ("": none named).
func (k *kubeHub) agentctl(conv string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	pre := []string{"--hub", k.h.URL, "--token-file", k.tf, "--env", "builtin"}
	if conv != "" {
		pre = append(pre, "--conversation", conv)
	}
	code := ctl.Main(ctx, append(pre, args...), ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// startKubeHub starts a hub on the cluster $AGENTD_KUBECONFIG (else
// $KUBECONFIG) names, with hostPath workspaces (wsMax > 0: bounded, ext4
// images); it skips the test without a cluster.
func startKubeHub(t *testing.T, wsMax int64) *kubeHub {
	t.Helper()
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
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", cfg}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH (the export line make k8s-up prints)")
	}
	kubectl("create", "namespace", ns)
	t.Cleanup(func() { kubectl("delete", "namespace", ns, "--wait=false") })
	dir := t.TempDir()
	// After the hub's cleanup, before the directory's removal: the hub
	// leaves its sandboxes (the namespace's deletion takes their objects),
	// so their bounded workspaces are unmounted and detached here, by path.
	t.Cleanup(func() {
		imgs, _ := filepath.Glob(filepath.Join(dir, "ws", ns, "*.img"))
		for _, img := range imgs {
			base := strings.TrimSuffix(img, ".img")
			loop := loopfs.LoopOf(img, base+".dev")
			if loop == "" {
				continue
			}
			if mp, _ := loopfs.MountOf(loop); mp != "" {
				if err := loopfs.Unmount(mp); err != nil {
					t.Error(err)
				}
			}
			if err := loopfs.Detach(loop); err != nil {
				t.Error(err)
			}
		}
	})
	// Generous start timeouts: on the shared cluster a Pod's sandbox has
	// taken 2–3 minutes to make under load.
	drv, err := kube.New(kube.Options{Kubeconfig: cfg, Namespace: ns, HostPathDir: filepath.Join(dir, "ws"), StartTimeout: 6 * time.Minute})
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
	o := sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: socketDir, BuiltinNetwork: "none",
		BaseImage: image, StartTimeout: 6 * time.Minute,
		Limits: sandbox.Limits{Pids: pids, WorkspaceBytes: wsMax},
	}
	if wsMax > 0 {
		o.WorkspaceBound = "ext4 on loop"
	}
	h := hubtest.Start(t, hubtest.Options{Sandboxes: o})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubeHub{h: h, ns: ns, drv: drv, kubectl: kubectl, tf: tf}
}
