package hub_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// Like every hub here, it runs as docs/deploy.md's ServiceAccount.
func TestKubeSandboxEndToEnd(t *testing.T) {
	k := startKubeHub(t, 0)
	agentctl := func(args ...string) (int, string, string) { return k.agentctl("c-kube", args...) }
	code, out, errOut := agentctl("sh", `echo "$(id -u) $(hostname)" && echo kept > /workspace/f`)
	if code != 0 {
		t.Fatalf("agentctl sh: exit %d, %q %q", code, out, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "1000" || !strings.HasPrefix(f[1], "agentd-sb-") {
		t.Fatalf("agentctl sh: %q; want uid 1000 and the Pod's hostname agentd-sb-…", out)
	}
	pod := f[1]
	if _, err := k.cs.CoreV1().Pods(k.ns).Get(t.Context(), pod, metav1.GetOptions{}); err != nil {
		t.Fatalf("the sandbox's pod %s: %v", pod, err)
	}
	if code, out, errOut := agentctl("sandbox", "stop", strings.TrimPrefix(pod, "agentd-")); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := agentctl("sh", "cat /workspace/f"); code != 0 || strings.TrimSpace(out) != "kept" {
		t.Errorf("after a stop, the next call: exit %d %q %q; want the workspace kept", code, out, errOut)
	}
	// Running, with an unbounded workspace: where the driver can pause its
	// Pod (the hub on its node), the fork pauses it, as on Docker, and
	// holds its workspace; elsewhere it is refused (nothing to freeze).
	// The driver itself says which (a paused Pod thawed at once).
	canPause := k.drv.Pause(t.Context(), pod) == nil
	if canPause {
		if err := k.drv.Unpause(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = k.agentctl("", "sandbox", "fork", strings.TrimPrefix(pod, "agentd-"))
	switch {
	case !canPause && (code == 0 || !strings.Contains(errOut, "stop the sandbox first")):
		t.Errorf("fork of a running sandbox with an unbounded workspace its Pod's node cannot freeze: exit %d %q %q; want a refusal saying to stop it first", code, out, errOut)
	case canPause && (code != 0 || !strings.HasPrefix(out, "sb-")):
		t.Errorf("fork of a running sandbox the driver can pause: exit %d %q %q; want the fork's id", code, out, errOut)
	case canPause:
		sb, err := k.h.Store.Sandbox(t.Context(), strings.TrimSpace(out))
		if err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := k.agentctl(sb.Conversation, "sh", "cat /workspace/f"); code != 0 || out != "kept\n" {
			t.Errorf("the fork's workspace: exit %d %q %q; want the source's file", code, out, errOut)
		}
		if code, out, errOut := agentctl("sh", "echo on"); code != 0 || out != "on\n" {
			t.Errorf("the source after its fork: exit %d %q %q; want it running again", code, out, errOut)
		}
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
// the real cluster (startKube's), with agentctl as its admin.
type kubeHub struct {
	*kubeDriverHub
	t  *testing.T
	h  *hubtest.Hub
	tf string
}

// ctl runs agentctl against the hub as its admin: exit code, stdout,
// stderr.
func (k *kubeHub) ctl(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(k.t.Context(), 10*time.Minute)
	defer cancel()
	code := ctl.Main(ctx, append([]string{"--hub", k.h.URL, "--token-file", k.tf}, args...),
		ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// agentctl runs agentctl against the hub in the builtin environment's
// conversation conv ("": none named).
func (k *kubeHub) agentctl(conv string, args ...string) (int, string, string) {
	pre := []string{"--env", "builtin"}
	if conv != "" {
		pre = append(pre, "--conversation", conv)
	}
	return k.ctl(append(pre, args...)...)
}

// startHub starts a hub with sandbox options o (k.options, tuned) on k's
// driver. Its sandboxes are removed when t ends, once the hub stopped.
func (k *kubeDriverHub) startHub(t *testing.T, o sandboxes.Options) *kubeHub {
	t.Helper()
	h := hubtest.Start(t, hubtest.Options{Sandboxes: o})
	t.Cleanup(func() {
		h.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		infos, _ := k.drv.List(ctx, map[string]string{sandbox.LabelManaged: "1"})
		for _, in := range infos {
			if err := k.drv.Remove(ctx, in.ID); err != nil {
				t.Errorf("remove sandbox %s: %v", in.ID, err)
			}
		}
	})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubeHub{kubeDriverHub: k, t: t, h: h, tf: tf}
}

// startKubeHub starts a hub on a namespace of the cluster (startKube),
// with hostPath workspaces (wsMax > 0: bounded, ext4 images); it skips the
// test, saying how to start a cluster, without one.
func startKubeHub(t *testing.T, wsMax int64) *kubeHub {
	t.Helper()
	// Generous start timeouts: on the shared cluster a Pod's sandbox has
	// taken 2–3 minutes to make under load.
	k := startKubeWith(t, func(_ *kubeDriverHub, o *kube.Options) { o.StartTimeout = 6 * time.Minute })
	o := k.options(sandboxtest.AgentdBinary(t))
	o.StartTimeout = 6 * time.Minute
	o.Limits.WorkspaceBytes = wsMax
	if wsMax > 0 {
		o.WorkspaceBound = "ext4 on loop"
	}
	return k.startHub(t, o)
}
