package kube

import (
	"context"
	"fmt"
	"slices"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// gvisorHandler is the CRI handler gVisor's runtime is registered under
// (containerd's runtimes.runsc; GKE Sandbox and make k8s-up name it so).
const gvisorHandler = "runsc"

// preferredGVisorClass is the RuntimeClass chosen when more than one has
// gVisor's handler (the name GKE and make k8s-up give it).
const preferredGVisorClass = "gvisor"

// Runtimes lists the cluster's RuntimeClasses: name → [its handler]. A
// Spec.Runtime names a RuntimeClass; gVisor's runtime names
// (sandbox.RuntimeGVisor and RuntimeGVisorNet, as the hub asks for them) are
// listed too when a class has gVisor's handler, and a Spec naming one runs
// on that class (runtimeClass; the Pod's network is the cluster's either
// way, and the driver runs network "none" only).
func (d *Driver) Runtimes(ctx context.Context) (map[string][]string, error) {
	list, err := d.runtimeClasses(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(list)+1)
	for _, rc := range list {
		out[rc.Name] = []string{rc.Handler}
	}
	if gvisorClass(list) != "" {
		for _, rt := range []string{sandbox.RuntimeGVisor, sandbox.RuntimeGVisorNet} {
			if _, ok := out[rt]; !ok {
				out[rt] = []string{gvisorHandler}
			}
		}
	}
	return out, nil
}

// MissingRuntime says what the cluster lacks for isolation's runtime rt,
// for the hub's refusal of an environment it cannot run.
func (d *Driver) MissingRuntime(isolation, rt string) string {
	if rt == sandbox.RuntimeGVisor || rt == sandbox.RuntimeGVisorNet {
		return fmt.Sprintf("isolation %s needs a RuntimeClass whose handler is %s (gVisor's containerd shim) on the cluster, which has none: "+
			"register containerd-shim-runsc-v1 with the nodes' containerd and create the RuntimeClass (make k8s-up does both where the shim is built; docs/kubernetes.md); "+
			"it never runs on runc instead", isolation, gvisorHandler)
	}
	return fmt.Sprintf("isolation %s needs the RuntimeClass %s on the cluster, which has none", isolation, rt)
}

// runtimeClass is the RuntimeClass a Pod of a spec naming runtime rt runs
// with: "" for the cluster's default, rt itself when a class has that
// name, and for gVisor's runtime names (runsc, runsc-net) the class with
// gVisor's handler (runsc), "gvisor" first. It refuses a runtime the
// cluster has no class for (sandbox.ErrNotSupported): a sandbox never runs
// on another runtime instead.
func (d *Driver) runtimeClass(ctx context.Context, rt string) (string, error) {
	if rt == "" {
		return "", nil
	}
	list, err := d.runtimeClasses(ctx)
	if err != nil {
		return "", err
	}
	if slices.ContainsFunc(list, func(rc nodev1.RuntimeClass) bool { return rc.Name == rt }) {
		return rt, nil
	}
	if rt == sandbox.RuntimeGVisor || rt == sandbox.RuntimeGVisorNet {
		if rc := gvisorClass(list); rc != "" {
			return rc, nil
		}
		return "", fmt.Errorf("runtime %s: %w: the cluster has no RuntimeClass whose handler is %s (gVisor)", rt, sandbox.ErrNotSupported, gvisorHandler)
	}
	return "", fmt.Errorf("runtime %s: %w: the cluster has no RuntimeClass %s", rt, sandbox.ErrNotSupported, rt)
}

// gvisorClass is the name of the class of list with gVisor's handler:
// "gvisor" if it is one, else the first by name; "" when none has it.
func gvisorClass(list []nodev1.RuntimeClass) string {
	var names []string
	for _, rc := range list {
		if rc.Handler == gvisorHandler {
			names = append(names, rc.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	if slices.Contains(names, preferredGVisorClass) {
		return preferredGVisorClass
	}
	return slices.Min(names)
}

// runtimeClasses lists the cluster's RuntimeClasses.
func (d *Driver) runtimeClasses(ctx context.Context) ([]nodev1.RuntimeClass, error) {
	list, err := d.cs.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, d.fail("list runtime classes", err)
	}
	return list.Items, nil
}
