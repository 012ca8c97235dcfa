package hub_test

import (
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube/kubetest"
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
	kubetest.Admin(t) // skips without a cluster, before the listener's
	// The node's address on make k8s-up's bridge: this machine made it,
	// and the Pods reach it.
	lis, err := net.Listen("tcp", "10.213.0.1:0")
	if err != nil {
		t.Skipf("cannot listen on the cluster bridge's address 10.213.0.1 (make k8s-up makes it): %v", err)
	}
	t.Cleanup(func() { lis.Close() }) // the hub's, once it started
	k := startKubeWith(t, func(k *kubeDriverHub, o *kube.Options) {
		o.AgentdImage, o.HubAdvertise = sandboxtest.KubeAgentdImage(t, k.admin), lis.Addr().String()
		// A start took 2.5-4 min while the shared cluster ran everyone's
		// tests (its containers were copies of their images: the native
		// snapshotter).
		o.StartTimeout = 8 * time.Minute
	})
	o := k.options(sandboxtest.AgentdBinary(t))
	o.StartTimeout, o.TunnelListener, o.TunnelDial = 8*time.Minute, lis, true
	kh := k.startHub(t, o)
	agentctl := func(args ...string) (int, string, string) { return kh.agentctl("c-kube", args...) }
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
	p, err := k.cs.CoreV1().Pods(k.ns).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's pod %s: %v", pod, err)
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("pod %s: volume %s is a hostPath (%s)", pod, v.Name, v.HostPath.Path)
		}
	}
	if len(p.Spec.InitContainers) == 0 || !strings.HasPrefix(p.Spec.InitContainers[0].Image, "agentd.local/agentd:") {
		t.Errorf("pod %s's init containers: %+v; want one of agentd.local/agentd:…", pod, p.Spec.InitContainers)
	}
	sec, err := k.cs.CoreV1().Secrets(k.ns).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's record %s: %v", pod, err)
	}
	if env, want := string(sec.Data["AGENTD_SANDBOX_HUB"]), "wss://"+lis.Addr().String(); env != want {
		t.Errorf("the sandbox's AGENTD_SANDBOX_HUB: %q; want %q", env, want)
	}
	if code, out, errOut := agentctl("sandbox", "stop", strings.TrimPrefix(pod, "agentd-")); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := agentctl("sh", "cat /workspace/f"); code != 0 || strings.TrimSpace(out) != "kept" {
		t.Errorf("after a stop, the next call: exit %d %q %q; want the workspace kept", code, out, errOut)
	}
}
