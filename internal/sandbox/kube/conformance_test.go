package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/drivertest"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// conformanceScripts are the suite's behaviours for sh in a Debian-based
// image. The Pod shares its process namespace, so sh is not PID 1 and
// SIGTERM reaches it as under the Docker driver's init.
var conformanceScripts = map[drivertest.Behaviour]string{
	drivertest.Serve:      `trap "exit 0" TERM; sleep 300 & wait`,
	drivertest.IgnoreTerm: `trap "" TERM; sleep 300 & wait`,
	drivertest.Exit3:      `exit 3`,
	drivertest.ExitSoon:   `sleep 2`,
	drivertest.WriteTree:  `mkdir -p /workspace/d && printf one > /workspace/d/f && chmod 640 /workspace/d/f && ln -s d/f /workspace/l && TZ=UTC touch -d "2020-01-02 03:04:05" /workspace/d/f`,
	drivertest.CheckTree:  `[ "$(cat /workspace/d/f)" = one ] && [ "$(stat -c %a /workspace/d/f)" = 640 ] && [ -L /workspace/l ] && [ "$(readlink /workspace/l)" = d/f ] && [ "$(stat -c %Y /workspace/d/f)" = 1577934245 ] && [ ! -e /workspace/fork-only ] && touch /workspace/fork-only`,
	drivertest.WorkspaceOwned: `[ "$(id -u)" = 1000 ] && [ "$(stat -c %u:%g /workspace)" = 1000:1000 ] && ` +
		`touch /workspace/.owned`,
}

// testImages are the images the tests run, the first the cluster has
// (make k8s-up imports them from the local Docker engine).
var testImages = []string{"agentd-test/debian-slim:1", sandbox.BaseImage}

// cluster returns a driver on a namespace of its own on the cluster
// $AGENTD_KUBECONFIG (else $KUBECONFIG) names, deleted when the test ends,
// with hostPath workspaces under a temporary directory (tune changes the
// options); it skips the test when no cluster answers.
func cluster(t *testing.T, tune ...func(*Options)) *Driver {
	t.Helper()
	cfg := os.Getenv("AGENTD_KUBECONFIG")
	if cfg == "" {
		cfg = os.Getenv("KUBECONFIG")
	}
	if cfg == "" {
		t.Skip("no cluster: set AGENTD_KUBECONFIG (or KUBECONFIG); `make k8s-up` starts one on this machine and prints the line to paste (docs/kubernetes.md)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the hostPath workspaces are made owned by uid 1000: run as root")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "agentd-dt-" + hex.EncodeToString(b)
	o := Options{Kubeconfig: cfg, Namespace: ns, HostPathDir: t.TempDir(), Logger: zaptest.NewLogger(t), WorkspaceSize: 64 << 20}
	for _, f := range tune {
		f(&o)
	}
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := d.cs.Discovery().ServerVersion(); err != nil {
		t.Skipf("no cluster answers at %s (%v): `make k8s-up` starts one (docs/kubernetes.md)", d.host, err)
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{sandbox.LabelManaged: "test"}}}
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return d
}

// testImage is the first of testImages the cluster has.
func testImage(t *testing.T, d *Driver) string {
	t.Helper()
	for _, ref := range testImages {
		_, err := d.Image(t.Context(), ref)
		if err == nil {
			return ref
		}
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatal(err)
		}
	}
	t.Skipf("none of %v is on the cluster's nodes: K8S_IMAGES=%q make k8s-up imports them from the local engine", testImages, testImages)
	return ""
}

// The conformance suite on the real cluster: Pods of a Debian-based image,
// hostPath workspaces. Pull is refused (the driver never pulls: no
// PullImage), Pause too (CannotPause: Kubernetes has no freezer).
func TestConformance(t *testing.T) { conformance(t) }

// The suite again with Pods that get agentd from the init container (this
// tree's agentd, imported as an image) and no host mount but their
// workspace: every contract holds the same.
func TestConformanceInitContainer(t *testing.T) { conformance(t, withAgentdImage(t)) }

// withAgentdImage turns on the init-container mode with this tree's agentd
// image, the hub advertised on the node's bridge address (nothing listens
// there: these Pods do not dial it).
func withAgentdImage(t *testing.T) func(*Options) {
	return func(o *Options) {
		o.AgentdImage = sandboxtest.KubeAgentdImage(t, o.Kubeconfig)
		o.HubAdvertise = nodeAddr + ":9"
	}
}

// nodeAddr is the node's address on make k8s-up's bridge, which Pods reach.
const nodeAddr = "10.213.0.1"

func conformance(t *testing.T, tune ...func(*Options)) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := cluster(t, tune...)
		image := testImage(t, d)
		pids, err := d.PodPidsLimit(t.Context())
		if err != nil || pids == 0 {
			t.Fatalf("the nodes' podPidsLimit: %d, %v; want one (make k8s-up sets 512)", pids, err)
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
			MissingImage:   "agentd-test/absent:1",
			EnforcesLimits: true,
			CannotPause:    true,
			Timeout:        time.Duration(2+2*len(tune)) * time.Minute, // the init container's Pods start slower

		}
	})
}
