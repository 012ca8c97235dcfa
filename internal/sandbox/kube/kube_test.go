package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// spec is a sandbox of the test image that serves until SIGTERM, named
// name, with the run's labels plus extra.
func testSpec(t *testing.T, d *Driver, name string, extra map[string]string) sandbox.Spec {
	t.Helper()
	pids, err := d.PodPidsLimit(t.Context())
	if err != nil || pids == 0 {
		t.Fatalf("the nodes' podPidsLimit: %d, %v", pids, err)
	}
	l := map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: "kubetest", sandbox.LabelID: name}
	for k, v := range extra {
		l[k] = v
	}
	return sandbox.Spec{
		Name: name, Image: testImage(t, d), Labels: l, Network: "none",
		Cmd:    []string{"sh", "-c", conformanceScripts[0]},
		Env:    []string{"AGENTD_TOKEN=secret-value", "HOME=/elsewhere"},
		Limits: sandbox.Limits{CPUs: 0.25, MemoryBytes: 48 << 20, Pids: pids, TmpBytes: 4 << 20, HomeBytes: 4 << 20},
	}
}

// create creates s and removes it when the test ends.
func create(t *testing.T, d *Driver, s sandbox.Spec) string {
	t.Helper()
	id, err := d.Create(t.Context(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Remove(ctx, id); err != nil {
			t.Errorf("Remove %s: %v", id, err)
		}
	})
	return id
}

// The Pod carries the hardening (uid 1000, read-only root, no
// capabilities, no escalation, seccomp, limits, no token), its environment
// comes from the record Secret (no credential in the Pod spec), and the
// running sandbox sees it so.
func TestPodHardening(t *testing.T) {
	d := cluster(t)
	s := testSpec(t, d, "agentd-kt-harden", nil)
	// Checks in the sandbox itself, then serve.
	s.Cmd = []string{"sh", "-c", `set -e; [ "$(id -u):$(id -g)" = 1000:1000 ]; ! touch /probe 2>/dev/null; ` +
		`touch /tmp/x /workspace/x "$HOME/x"; [ "$HOME" = /home/agent ]; [ "$AGENTD_TOKEN" = secret-value ]; ` +
		`grep -q "^CapEff:.0000000000000000" /proc/self/status; grep -q "^NoNewPrivs:.1" /proc/self/status; grep -q "^Seccomp:.2" /proc/self/status; ` +
		`trap "exit 0" TERM; sleep 300 & wait`}
	id := create(t, d, s)
	if err := d.Start(t.Context(), id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	p, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case *sc.RunAsUser != 1000 || *sc.RunAsGroup != 1000 || !*sc.RunAsNonRoot:
		t.Errorf("user: %+v", sc)
	case !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || *sc.Privileged:
		t.Errorf("root, escalation, privilege: %+v", sc)
	case len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
		t.Errorf("capabilities: %+v", sc.Capabilities)
	case c.Resources.Limits.Memory().Value() != s.Limits.MemoryBytes || c.Resources.Limits.Cpu().MilliValue() != 250:
		t.Errorf("limits: %v", c.Resources.Limits)
	case *p.Spec.AutomountServiceAccountToken || !*p.Spec.ShareProcessNamespace:
		t.Errorf("token %v, shared pid namespace %v", *p.Spec.AutomountServiceAccountToken, *p.Spec.ShareProcessNamespace)
	}
	for _, e := range c.Env {
		if strings.Contains(e.Value, "secret-value") {
			t.Errorf("the credential is in the Pod spec: %s", e.Name)
		}
	}
	// The checks ran before serve: the sandbox is running, not exited 1.
	time.Sleep(2 * time.Second)
	if in, err := d.Inspect(t.Context(), id); err != nil || in.State != sandbox.StateRunning {
		t.Errorf("Inspect: %+v, %v; want running (the checks in the sandbox failed: exit code %d)", in, err, in.ExitCode)
	}
}

// Labels Kubernetes refuses as labels (the egress allow list's commas, the
// broker's JSON) are kept and filtered on all the same.
func TestLabelsKubernetesRefuses(t *testing.T) {
	d := cluster(t)
	egress := "a.example.com,b.example.com"
	broker := `[{"host":"api.example.com"}]`
	id := create(t, d, testSpec(t, d, "agentd-kt-labels", map[string]string{sandbox.LabelEgress: egress, sandbox.LabelBroker: broker}))
	other := create(t, d, testSpec(t, d, "agentd-kt-labels2", map[string]string{sandbox.LabelEgress: "c.example.com,d.example.com"}))
	infos, err := d.List(t.Context(), map[string]string{sandbox.LabelEgress: egress})
	if err != nil || len(infos) != 1 || infos[0].ID != id {
		t.Fatalf("List by the allow list: %+v, %v; want %s alone (not %s)", infos, err, id, other)
	}
	if infos[0].Labels[sandbox.LabelBroker] != broker {
		t.Errorf("labels: %v; want the broker's %s", infos[0].Labels, broker)
	}
	vols, err := d.Volumes(t.Context(), map[string]string{sandbox.LabelBroker: broker})
	if err != nil || len(vols) != 1 || vols[0].Name != claimName(id) {
		t.Errorf("Volumes by the broker rules: %+v, %v; want %s", vols, err, claimName(id))
	}
}

// Create refuses what the cluster cannot carry out, and leaves nothing:
// a pids limit below the nodes' podPidsLimit (off a node), a network
// other than none, a name that is no DNS label; Pull says ErrNotSupported,
// and Pause too off a node.
func TestRefusals(t *testing.T) {
	d := cluster(t)
	ctx := t.Context()
	onANode := noFreezer(nil) == ""
	for _, tc := range []struct {
		name string
		edit func(*sandbox.Spec)
		want string
	}{
		// The hub bounds a Pod's processes itself on its own node
		// (TestPidsLimit); elsewhere a node's kubelet must.
		{"pids below the node's, off a node", func(s *sandbox.Spec) { s.Limits.Pids = 64 }, "podPidsLimit"},
		{"a network", func(s *sandbox.Spec) { s.Network = "agentd-sandboxes" }, "network"},
		{"an upper-case name", func(s *sandbox.Spec) { s.Name = "Agentd-KT" }, "DNS label"},
	} {
		if onANode && tc.want == "podPidsLimit" {
			continue
		}
		s := testSpec(t, d, "agentd-kt-refused", nil)
		tc.edit(&s)
		if id, err := d.Create(ctx, s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Create with %s: %q, %v; want an error saying %q", tc.name, id, err, tc.want)
			_ = d.Remove(ctx, id)
		}
	}
	if infos, err := d.List(ctx, map[string]string{sandbox.LabelHub: "kubetest"}); err != nil || len(infos) != 0 {
		t.Errorf("after the refusals: %+v, %v; want nothing made", infos, err)
	}
	if ents, err := os.ReadDir(filepath.Join(d.hostDir, d.ns)); err == nil && len(ents) != 0 {
		t.Errorf("workspace directories left: %v", ents)
	}
	id := create(t, d, testSpec(t, d, "agentd-kt-pause", nil))
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := d.Pause(ctx, id); onANode && err != nil || !onANode && !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("Pause (the hub on a node: %v): %v, want ErrNotSupported off a node, nil on one", onANode, err)
	}
}
