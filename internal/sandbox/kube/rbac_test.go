package kube

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/drivertest"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube/kubetest"
)

// rbacDriver is a driver on a fresh namespace set up as docs/deploy.md
// says, as its ServiceAccount agenthub: the documented grant and nothing
// else.
func rbacDriver(t *testing.T) (*Driver, string) {
	t.Helper()
	admin, cs := kubetest.Admin(t)
	if os.Geteuid() != 0 {
		t.Skip("the hostPath workspaces are made owned by uid 1000: run as root")
	}
	ns, kc := kubetest.Namespace(t, cs, admin, "agentd-rbac")
	d, err := New(Options{Kubeconfig: kc, Namespace: ns, HostPathDir: t.TempDir(), Logger: zaptest.NewLogger(t), WorkspaceSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, kc
}

// The conformance suite as the hub's documented identity (docs/deploy.md's
// Role and ClusterRole): a verb the driver needs and the page lacks fails
// a contract with Forbidden.
func TestRBACConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d, _ := rbacDriver(t)
		if err := d.Ping(t.Context()); err != nil {
			t.Fatalf("ping as the service account: %v", err)
		}
		image := testImage(t, d)
		reg := startPullRegistry(t) // Pull as the service account
		pullRef, _ := reg.push(t, "agentd-test/pull-"+randHex(4)+":v1")
		pids, err := d.PodPidsLimit(t.Context())
		if err != nil || pids == 0 {
			t.Fatalf("the nodes' podPidsLimit as the service account: %d, %v", pids, err)
		}
		return drivertest.Harness{
			Driver: d,
			Spec: func(t *testing.T, b drivertest.Behaviour) (sandbox.Spec, bool) {
				return sandbox.Spec{
					Image:   image,
					Cmd:     []string{"sh", "-c", conformanceScripts[b]},
					Network: "none",
					Limits:  sandbox.Limits{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: pids, TmpBytes: 8 << 20, HomeBytes: 8 << 20},
				}, true
			},
			MissingImage:   reg.host + "/agentd-test/absent:1",
			PullImage:      pullRef,
			EnforcesLimits: true,
			CannotPause:    true,
			Timeout:        2 * time.Minute,
		}
	})
}

// The documented grant is not more than it says: as the service account,
// what lies outside it is Forbidden (so the test fails if the page's
// roles are widened to cluster-admin), and what lies inside it is not.
func TestRBACForbidsTheRest(t *testing.T) {
	d, kc := rbacDriver(t)
	cs := kubetest.Client(t, kc)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	outside := []struct {
		what string
		call func() error
	}{
		{"list secrets in kube-system", func() error {
			_, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list namespaces", func() error {
			_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get namespace default", func() error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			return err
		}},
		{"delete a node", func() error {
			return cs.CoreV1().Nodes().Delete(ctx, "agentd-nosuch-node", metav1.DeleteOptions{})
		}},
		{"get its own service account", func() error {
			_, err := cs.CoreV1().ServiceAccounts(d.ns).Get(ctx, kubetest.ServiceAccount, metav1.GetOptions{})
			return err
		}},
		{"list the namespace's Roles", func() error {
			_, err := cs.RbacV1().Roles(d.ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a Service", func() error {
			_, err := cs.CoreV1().Services(d.ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "agentd-rbac-probe"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		// pods/exec is granted (the workspace helper Pods); attaching to a
		// Pod's console and forwarding its ports are not.
		{"attach to a Pod (pods/attach)", func() error {
			return cs.CoreV1().RESTClient().Post().Namespace(d.ns).Resource("pods").Name("agentd-nosuch").
				SubResource("attach").Param("stdout", "true").Do(ctx).Error()
		}},
		{"forward a Pod's port (pods/portforward)", func() error {
			return cs.CoreV1().RESTClient().Post().Namespace(d.ns).Resource("pods").Name("agentd-nosuch").
				SubResource("portforward").Do(ctx).Error()
		}},
	}
	for _, c := range outside {
		if err := c.call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as the service account: %v, want Forbidden (docs/deploy.md grants more than it shows?)", c.what, err)
		}
	}
	// And what it grants is granted (a missing binding fails here first).
	if err := d.Ping(ctx); err != nil {
		t.Errorf("ping (get its own namespace): %v", err)
	}
	if _, err := d.Runtimes(ctx); err != nil {
		t.Errorf("runtime classes: %v", err)
	}
	if _, err := d.List(ctx, map[string]string{sandbox.LabelManaged: "1"}); err != nil {
		t.Errorf("list sandboxes: %v", err)
	}
	if _, err := d.PodPidsLimit(ctx); err != nil {
		t.Errorf("podPidsLimit (nodes/proxy configz): %v", err)
	}
}
