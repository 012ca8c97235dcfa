package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// --kube-toleration's and --kube-node-selector's forms, and what they
// refuse.
func TestParsePlacement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    corev1.Toleration
		wantErr string
	}{
		{in: "agentd.test/second-node=true:NoSchedule", want: corev1.Toleration{Key: "agentd.test/second-node", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		{in: "dedicated:NoExecute", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		{in: "dedicated", wantErr: "want KEY[=VALUE]:EFFECT"},
		{in: "dedicated:Sometimes", wantErr: `effect "Sometimes"`},
		{in: "=x:NoSchedule", wantErr: "key:"},
		{in: "bad key:NoSchedule", wantErr: "key:"},
		{in: "k=bad value:NoSchedule", wantErr: "value:"},
	} {
		got, err := ParseToleration(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseToleration(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseToleration(%q): %v", tc.in, err)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("ParseToleration(%q) (-got +want):\n%s", tc.in, diff)
		}
	}

	sel, err := ParseNodeSelector([]string{"pool=sandbox", "agentd.test/node=n2", "pool=sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sel, map[string]string{"pool": "sandbox", "agentd.test/node": "n2"}); diff != "" {
		t.Errorf("ParseNodeSelector (-got +want):\n%s", diff)
	}
	if sel, err := ParseNodeSelector(nil); sel != nil || err != nil {
		t.Errorf("ParseNodeSelector(nil) = %v, %v; want nil, nil", sel, err)
	}
	for _, in := range [][]string{{"pool"}, {"pool=a", "pool=b"}, {"pool=a b"}} {
		if _, err := ParseNodeSelector(in); err == nil {
			t.Errorf("ParseNodeSelector(%q): no error", in)
		}
	}
}

// The nodes the driver counts for images and podPidsLimit are those the
// scheduler may put its Pods on: selector matched, NoSchedule and
// NoExecute taints tolerated, not cordoned; and every Pod it makes
// carries the placement.
func TestEligibleAndPlaced(t *testing.T) {
	t.Parallel()
	node := func(labels map[string]string, unsched bool, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.NodeSpec{Unschedulable: unsched, Taints: taints}}
	}
	second := corev1.Taint{Key: "agentd.test/second-node", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	prefer := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	tol, err := ParseToleration("agentd.test/second-node=true:NoSchedule")
	if err != nil {
		t.Fatal(err)
	}
	plain := &Driver{}
	pool := &Driver{nodeSelector: map[string]string{"agentd.test/node": "n2"}, tolerations: []corev1.Toleration{tol}}
	everything := &Driver{tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}
	n1 := node(map[string]string{"agentd.test/node": "n1"}, false, prefer)
	n2 := node(map[string]string{"agentd.test/node": "n2"}, false, second)
	n2cordoned := node(map[string]string{"agentd.test/node": "n2"}, true, second)
	n2other := node(map[string]string{"agentd.test/node": "n2"}, false, corev1.Taint{Key: "agentd.test/second-node", Value: "false", Effect: corev1.TaintEffectNoSchedule})
	for _, tc := range []struct {
		name string
		d    *Driver
		n    *corev1.Node
		want bool
	}{
		{"plain on n1 (PreferNoSchedule ignored)", plain, n1, true},
		{"plain on tainted n2", plain, n2, false},
		{"pool on n1 (selector)", pool, n1, false},
		{"pool on n2", pool, n2, true},
		{"pool on cordoned n2", pool, n2cordoned, false},
		{"pool on n2 tainted with another value", pool, n2other, false},
		{"tolerate-all on n2", everything, n2, true},
	} {
		if got := tc.d.eligible(tc.n); got != tc.want {
			t.Errorf("%s: eligible = %v, want %v", tc.name, got, tc.want)
		}
	}

	sec := &corev1.Secret{ObjectMeta: objectMeta("s1", nil)}
	s := storedSpec{Image: "img", Cmd: []string{"true"}, Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 1 << 20, Pids: 10, TmpBytes: 1 << 20, HomeBytes: 1 << 20}}
	for name, spec := range map[string]*corev1.PodSpec{
		"sandbox": &pool.pod(sec, s).Spec,
		"helper":  &pool.helperPod(sec, s, "s1-ws-0", "export", "", []helperMount{{claimName("s1"), sandbox.WorkspaceDir, false}}).Spec,
		"probe":   &pool.probePod("p", "server", "10.0.0.1").Spec,
	} {
		if diff := cmp.Diff(spec.NodeSelector, pool.nodeSelector); diff != "" {
			t.Errorf("%s pod's node selector (-got +want):\n%s", name, diff)
		}
		if diff := cmp.Diff(spec.Tolerations, pool.tolerations); diff != "" {
			t.Errorf("%s pod's tolerations (-got +want):\n%s", name, diff)
		}
	}
	if p := plain.pod(sec, s); p.Spec.NodeSelector != nil || p.Spec.Tolerations != nil {
		t.Errorf("without placement: selector %v, tolerations %v; want none", p.Spec.NodeSelector, p.Spec.Tolerations)
	}
}
