package hub_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
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
	k := startKube(t) // skips without a cluster
	rcs, err := k.cs.NodeV1().RuntimeClasses().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var classes []string
	for _, rc := range rcs.Items {
		if rc.Handler == "runsc" {
			classes = append(classes, rc.Name)
		}
	}
	if len(classes) == 0 {
		t.Skip("the cluster has no RuntimeClass with handler runsc: make k8s-up creates RuntimeClass gvisor (gVisor's shim from tools/gvisor) unless K8S_GVISOR=0")
	}
	o := k.options(sandboxtest.AgentdBinary(t))
	o.StartTimeout = 3 * time.Minute
	kh := k.startHub(t, o)
	agentctl := kh.ctl
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
	p, err := k.cs.CoreV1().Pods(k.ns).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's pod %s: %v", pod, err)
	}
	if rc := p.Spec.RuntimeClassName; rc == nil || !slices.Contains(classes, *rc) {
		t.Errorf("the Pod's runtimeClassName = %v, want one of the gVisor classes %q", rc, classes)
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
