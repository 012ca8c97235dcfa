package kube

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// A Pod in the init-container mode: no hostPath volume (its workspace is a
// claim), agentd copied from the image into a read-only /opt/agentd and
// runnable there, the key and CA files from the Secret in /run/agentd-key
// (writable: the key can be removed) and a read-only /run/agentd-ca; the
// init container as hardened as the sandbox's; the NetworkPolicy lets the
// Pods reach the hub's address and port only. Read back from the API.
func TestInitContainerPod(t *testing.T) {
	d := cluster(t, withAgentdImage(t))
	s := testSpec(t, d, "agentd-kt-init", nil)
	s.KeyHostDir, s.CAHostDir = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(s.KeyHostDir, "key"), []byte("the-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.CAHostDir, "bundle.pem"), []byte("the-bundle"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Cmd = []string{"sh", "-c", `set -e; /opt/agentd/agentd version >/dev/null; echo "$(cat /run/agentd-key/key) $(cat /run/agentd-ca/bundle.pem)"; ` +
		`rm /run/agentd-key/key; [ ! -e /run/agentd-key/key ]; ! touch /opt/agentd/x 2>/dev/null; ! touch /run/agentd-ca/x 2>/dev/null; ` +
		`[ ! -e /run/agentd-secret ]; echo ok; trap "exit 0" TERM; sleep 300 & wait`}
	id := create(t, d, s)
	if err := d.Start(t.Context(), id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	p, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath (%s)", v.Name, v.HostPath.Path)
		}
	}
	if len(p.Spec.InitContainers) != 1 {
		t.Fatalf("init containers: %+v", p.Spec.InitContainers)
	}
	ic := p.Spec.InitContainers[0]
	sc := ic.SecurityContext
	if ic.Image != d.agentdImage || *sc.RunAsUser != 1000 || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("init container: image %s, %+v", ic.Image, sc)
	}
	var logs string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		logs = podLogs(t, d, id)
		if strings.Contains(logs, "ok") {
			break
		}
	}
	if logs != "the-key the-bundle\nok\n" {
		t.Errorf("the sandbox's output: %q; want the key and CA files it was given, then ok", logs)
	}
	np, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Get(t.Context(), tunnelPolicyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := np.Spec.Egress
	if len(np.Spec.Ingress) != 0 || len(e) != 1 || len(e[0].To) != 1 || e[0].To[0].IPBlock == nil || e[0].To[0].IPBlock.CIDR != nodeAddr+"/32" ||
		len(e[0].Ports) != 1 || e[0].Ports[0].Port.IntValue() != 9 || np.Spec.PodSelector.MatchLabels[labelTunnel] != "1" || p.Labels[labelTunnel] != "1" {
		t.Errorf("network policy %s: %+v; pod labels %v", tunnelPolicyName, np.Spec, p.Labels)
	}
	// Removal takes the files' Secret with it.
	if err := d.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cs.CoreV1().Secrets(d.ns).Get(t.Context(), id+filesSuffix, metav1.GetOptions{}); err == nil {
		t.Errorf("secret %s%s left after Remove", id, filesSuffix)
	}
}

// An init container that fails fails Start at once, saying why.
func TestInitContainerFailure(t *testing.T) {
	d := cluster(t, func(o *Options) { o.AgentdImage, o.HubAdvertise = "agentd.local/agentd:absent", nodeAddr+":9" })
	id := create(t, d, testSpec(t, d, "agentd-kt-initfail", nil))
	err := d.Start(t.Context(), id)
	if err == nil || !strings.Contains(err.Error(), "init container") || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("Start with a missing agentd image: %v; want the init container's ErrImageNeverPull", err)
	}
	if in, err := d.Inspect(t.Context(), id); err != nil || in.State == sandbox.StateRunning {
		t.Errorf("after the failed start: %+v, %v", in, err)
	}
}

func podLogs(t *testing.T, d *Driver, pod string) string {
	t.Helper()
	rc, err := d.cs.CoreV1().Pods(d.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(t.Context())
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}
