package kube

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Placement: an operator who keeps sandboxes on nodes of their own (a
// pool tainted so that nothing else lands there) gives the driver a node
// selector and tolerations (Options.NodeSelector, Options.Tolerations).
// Every Pod the driver makes carries them: sandboxes', their workspace
// helpers' and the policy probe's (which must run where sandboxes run: a
// pool's nodes may not enforce NetworkPolicy where the others do). The
// driver still names no node: the scheduler places each Pod, and a
// sandbox's claim (a volume with node affinity, ReadWriteOnce) keeps a
// restarted sandbox on its volume's node. The nodes the Pods may land on
// are also the ones whose images and podPidsLimit Create checks
// (eligible).

// place gives spec the driver's node selector and tolerations.
func (d *Driver) place(spec *corev1.PodSpec) {
	if len(d.nodeSelector) > 0 {
		spec.NodeSelector = maps.Clone(d.nodeSelector)
	}
	if len(d.tolerations) > 0 {
		spec.Tolerations = slices.Clone(d.tolerations)
	}
}

// eligible reports whether the scheduler may put the driver's Pods on n:
// its labels match the node selector, and the driver tolerates each of its
// NoSchedule and NoExecute taints. A cordoned node is not eligible.
func (d *Driver) eligible(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for k, v := range d.nodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(d.tolerations, func(t corev1.Toleration) bool { return tolerates(t, taint) }) {
			return false
		}
	}
	return true
}

// tolerates reports whether t tolerates taint, as the scheduler matches
// them (operators Exists and Equal).
// eligibleNodes are the nodes of ns the driver's Pods may run on.
func (d *Driver) eligibleNodes(ns []corev1.Node) []corev1.Node {
	var out []corev1.Node
	for i := range ns {
		if d.eligible(&ns[i]) {
			out = append(out, ns[i])
		}
	}
	return out
}

func tolerates(t corev1.Toleration, taint *corev1.Taint) bool {
	switch {
	case t.Effect != "" && t.Effect != taint.Effect:
		return false
	case t.Key != "" && t.Key != taint.Key:
		return false
	case t.Operator == corev1.TolerationOpExists:
		return true
	default: // Equal, or "" (Equal)
		return t.Key != "" && t.Value == taint.Value
	}
}

// placementNote says where the driver's Pods may land, for messages about
// the nodes.
func (d *Driver) placementNote() string {
	if len(d.nodeSelector) == 0 && len(d.tolerations) == 0 {
		return "the cluster's schedulable untainted nodes"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d.nodeSelector)) {
		parts = append(parts, k+"="+d.nodeSelector[k])
	}
	return fmt.Sprintf("the nodes the sandboxes may run on (selector %s, %d tolerations)", strings.Join(parts, ","), len(d.tolerations))
}

// ParseNodeSelector parses node selector terms KEY=VALUE (agenthub's
// --kube-node-selector) into Options.NodeSelector.
func ParseNodeSelector(terms []string) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for _, t := range terms {
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("node selector %q: want KEY=VALUE", t))
			continue
		}
		if msgs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node selector %q: %s", t, strings.Join(msgs, "; ")))
			continue
		}
		if old, dup := out[k]; dup && old != v {
			errs = append(errs, fmt.Errorf("node selector %q: %s is already %q", t, k, old))
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		out = nil
	}
	return out, errors.Join(errs...)
}

// ParseToleration parses KEY[=VALUE]:EFFECT (agenthub's --kube-toleration)
// into a toleration: with a value, of taints KEY=VALUE (operator Equal);
// without, of taints with key KEY whatever their value (Exists). EFFECT
// is NoSchedule, PreferNoSchedule or NoExecute.
func ParseToleration(s string) (corev1.Toleration, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Toleration{}, fmt.Errorf("toleration %q: want KEY[=VALUE]:EFFECT", s)
	}
	t := corev1.Toleration{Effect: corev1.TaintEffect(effect), Operator: corev1.TolerationOpExists}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Toleration{}, fmt.Errorf("toleration %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	k, v, hasValue := strings.Cut(kv, "=")
	if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
		return corev1.Toleration{}, fmt.Errorf("toleration %q: key: %s", s, strings.Join(msgs, "; "))
	}
	t.Key = k
	if hasValue {
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return corev1.Toleration{}, fmt.Errorf("toleration %q: value: %s", s, strings.Join(msgs, "; "))
		}
		t.Operator, t.Value = corev1.TolerationOpEqual, v
	}
	return t, nil
}

// Terms are the driver's words for the hub's messages: a sandbox's Pod
// record, its claim, the nodes it may run on.
func (d *Driver) Terms() sandbox.Terms {
	return sandbox.Terms{
		Engine:    d.placementNote(),
		Container: "record (Secret)",
		Volume:    "PersistentVolumeClaim",
		Removal:   "kubectl delete",
		ImageFix:  "import it into each node's container runtime, or push it to a registry the nodes pull from (docs/kubernetes.md, Images and pulls)",
		Owned:     "its Pod and /workspace are in the cluster, but its tunnel dials that replica alone",
	}
}
