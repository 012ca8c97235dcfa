package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// A sandbox is a Secret (its record: the spec, its environment, its state
// while no Pod runs), a PersistentVolumeClaim (its workspace) and, while it
// runs, a Pod, all named after Spec.Name (see doc.go).
const (
	// recordType is the type of a sandbox's Secret.
	recordType corev1.SecretType = "agentd.devdepot.ai/sandbox"
	// annPrefix starts the driver's annotations.
	annPrefix = "agentd.devdepot.ai/"
	annSpec   = annPrefix + "spec"   // the spec without Env, Labels: JSON
	annLabels = annPrefix + "labels" // every label of the spec: JSON
	annState  = annPrefix + "state"  // created | exited: the state while no Pod runs
	annStart  = annPrefix + "started-at"
	annExit   = annPrefix + "exit-code"
	annOOM    = annPrefix + "oom-killed"
	annError  = annPrefix + "error"
	annImage  = annPrefix + "image-id" // the image id Create resolved
	// labelSandbox names the sandbox on each of its objects.
	labelSandbox = annPrefix + "sandbox"
	// wsSuffix names the workspace claim: NAME-workspace.
	wsSuffix = "-workspace"
	// container is the name of the sandbox's container in its Pod.
	container = "sandbox"
)

func claimName(name string) string { return name + wsSuffix }

// storedSpec is what the record keeps of a Spec to make its Pod again:
// everything but Env (the Secret's data) and Labels (annLabels).
type storedSpec struct {
	Image            string
	Cmd              []string
	AgentdHostDir    string `json:",omitempty"`
	HubSocketHostDir string `json:",omitempty"`
	KeyHostDir       string `json:",omitempty"`
	CAHostDir        string `json:",omitempty"`
	Network          string
	Limits           sandbox.Limits
	Runtime          string `json:",omitempty"`
	Home             string `json:",omitempty"`
}

func storeSpec(s sandbox.Spec) storedSpec {
	return storedSpec{
		Image: s.Image, Cmd: s.Cmd, AgentdHostDir: s.AgentdHostDir, HubSocketHostDir: s.HubSocketHostDir,
		KeyHostDir: s.KeyHostDir, CAHostDir: s.CAHostDir, Network: s.Network, Limits: s.Limits,
		Runtime: s.Runtime, Home: s.Home,
	}
}

// kubeLabels are the labels of l that Kubernetes accepts as labels (a
// comma-separated allow list, a JSON rule set are not): the rest are in
// annLabels alone, and List filters on them itself.
func kubeLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			out[k] = v
		}
	}
	return out
}

// objectMeta is the metadata of every object of sandbox name.
func objectMeta(name string, l map[string]string) metav1.ObjectMeta {
	kl := kubeLabels(l)
	kl[labelSandbox] = name
	all, _ := json.Marshal(l) // a map of strings always marshals
	return metav1.ObjectMeta{Name: name, Labels: kl, Annotations: map[string]string{annLabels: string(all)}}
}

// allLabels are an object's sandbox labels, from annLabels.
func allLabels(m metav1.ObjectMeta) map[string]string {
	var l map[string]string
	if err := json.Unmarshal([]byte(m.Annotations[annLabels]), &l); err != nil || l == nil {
		return maps.Clone(m.Labels)
	}
	return l
}

// selector is a label selector for what l allows the API server to
// filter, and the labels the caller must check itself.
func selector(l map[string]string) (string, map[string]string) {
	kl := kubeLabels(l)
	rest := map[string]string{}
	for k, v := range l {
		if _, ok := kl[k]; !ok {
			rest[k] = v
		}
	}
	return labels.SelectorFromSet(kl).String(), rest
}

// hasAll reports whether got carries every label of want.
func hasAll(got, want map[string]string) bool {
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			return false
		}
	}
	return true
}

// record reads sandbox id's Secret; ErrNotFound when it is gone.
func (d *Driver) record(ctx context.Context, op, id string) (*corev1.Secret, error) {
	sec, err := d.cs.CoreV1().Secrets(d.ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, d.fail(op+" "+id, err)
	}
	if sec.Type != recordType {
		return nil, notFound(op, id+" (a secret that is not a sandbox's)")
	}
	return sec, nil
}

// spec is the stored spec of a record.
func recordSpec(sec *corev1.Secret) (storedSpec, error) {
	var s storedSpec
	if err := json.Unmarshal([]byte(sec.Annotations[annSpec]), &s); err != nil {
		return s, fmt.Errorf("sandbox %s: its stored spec: %w", sec.Name, err)
	}
	return s, nil
}

// annotate merges annotations into sandbox name's record.
func (d *Driver) annotate(ctx context.Context, name string, ann map[string]string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	_, err := d.cs.CoreV1().Secrets(d.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return d.fail("record the state of sandbox "+name, err)
	}
	return nil
}

// exitedAnnotations record a finished run of the sandbox's Pod p (nil: it
// ran and left no status), for Inspect while no Pod runs.
func exitedAnnotations(p *corev1.Pod) map[string]string {
	ann := map[string]string{annState: string(sandbox.StateExited), annExit: "137", annOOM: "false", annError: ""}
	cs := containerStatus(p)
	if cs == nil {
		return ann
	}
	switch {
	case cs.State.Terminated != nil:
		t := cs.State.Terminated
		ann[annExit] = strconv.Itoa(int(t.ExitCode))
		ann[annOOM] = strconv.FormatBool(t.Reason == "OOMKilled")
		ann[annStart] = t.StartedAt.UTC().Format(time.RFC3339Nano)
	case cs.State.Running != nil:
		ann[annStart] = cs.State.Running.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	return ann
}

// recordInfo is the Info of a sandbox without a Pod.
func recordInfo(sec *corev1.Secret) sandbox.Info {
	s, _ := recordSpec(sec)
	in := sandbox.Info{
		ID: sec.Name, Name: sec.Name, Image: s.Image, ImageID: sec.Annotations[annImage],
		Labels: allLabels(sec.ObjectMeta), State: sandbox.StateCreated, Error: sec.Annotations[annError],
	}
	if sec.Annotations[annState] == string(sandbox.StateExited) {
		in.State = sandbox.StateExited
	}
	in.ExitCode, _ = strconv.Atoi(sec.Annotations[annExit])
	in.OOMKilled = sec.Annotations[annOOM] == "true"
	if t, err := time.Parse(time.RFC3339Nano, sec.Annotations[annStart]); err == nil {
		in.StartedAt = t
	}
	return in
}

// containerStatus is the sandbox container's status in p, or nil.
func containerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	if p == nil {
		return nil
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == container {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// podInfo is the Info of a sandbox whose Pod p exists.
func podInfo(sec *corev1.Secret, p *corev1.Pod) sandbox.Info {
	in := recordInfo(sec)
	in.State, in.ExitCode, in.OOMKilled, in.Error = sandbox.StateOther, 0, false, ""
	cs := containerStatus(p)
	switch {
	case cs == nil:
		in.Error = podWhy(p)
	case cs.State.Running != nil:
		in.State, in.StartedAt = sandbox.StateRunning, cs.State.Running.StartedAt.Time
	case cs.State.Terminated != nil:
		t := cs.State.Terminated
		in.State, in.ExitCode, in.OOMKilled = sandbox.StateExited, int(t.ExitCode), t.Reason == "OOMKilled"
		in.StartedAt = t.StartedAt.Time
		if t.ExitCode != 0 && t.Message != "" {
			in.Error = t.Message
		}
	case cs.State.Waiting != nil:
		in.Error = cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
	}
	return in
}

// podWhy is why a Pod without a container status does not run yet: its
// scheduling condition, if it failed.
func podWhy(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason + ": " + c.Message
		}
	}
	return string(p.Status.Phase)
}
