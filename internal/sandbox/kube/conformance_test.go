package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/drivertest"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube/kubetest"
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
	drivertest.FillWorkspace: `dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>/tmp/err; rc=$?; n=$(stat -c %s /workspace/fill); ` +
		`[ $rc = 0 ] && exit 1; grep -q "No space left" /tmp/err && [ "$n" -ge $((16<<20)) ] && exit 0; cat /tmp/err; exit 2`,
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
	return newCluster(t, Options{HostPathDir: t.TempDir()}, tune...)
}

// newCluster is cluster with the workspaces opts says (HostPathDir,
// StorageClass).
func newCluster(t *testing.T, opts Options, tune ...func(*Options)) *Driver {
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
	ns := "agentd-dt-" + randHex(4)
	opts.Kubeconfig, opts.Namespace, opts.Logger, opts.WorkspaceSize = cfg, ns, zaptest.NewLogger(t), 64<<20
	opts.StartTimeout = 6 * time.Minute // a loaded shared cluster has taken 2–3 minutes to make a Pod's sandbox
	for _, f := range tune {
		f(&opts)
	}
	d, err := New(opts)
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
		kubetest.ThawPods(ctx, d.cs, ns) // a Pod a failed test left paused
		if err := d.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return d
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
// hostPath workspaces (bounded ones ext4 images), Pull from a registry on
// loopback. Pause freezes the Pod through this host's cgroups (the host
// is the node), and is refused where it is not (CannotPause).
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
		return harness(t, cluster(t, tune...))
	})
}

// The conformance suite with the workspaces on claims of a StorageClass,
// as on a cluster with a provisioner: the driver has no host directory,
// and the workspace calls (export, import, copy) go through helper Pods.
// The class has no provisioner (this cluster has none): the test makes
// hostPath volumes of it beforehand, in a directory the driver is never
// told of, and checks that no helper Pod is left.
func TestConformanceStorageClass(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		class := "agentd-static-" + randHex(4)
		d := newCluster(t, Options{StorageClass: class})
		localVolumes(t, d, class, 48, 64<<20)
		t.Cleanup(func() { noHelperLeft(t, d) })
		return harness(t, d)
	})
}

// staticVolumes makes StorageClass class (no provisioner, claims bound at
// once) and n hostPath PersistentVolumes of it, size bytes each, in
// directories owned by uid 1000 (as a provisioner's or an init
// container's chown would leave them); all are deleted when the test
// ends.
func staticVolumes(t *testing.T, d *Driver, class string, n int, size int64) {
	t.Helper()
	makeVolumes(t, d, class, n, size, false)
}

// localVolumes is staticVolumes with local PersistentVolumes (on this
// host's node) in directories owned by root, mode 0755, as a provisioner
// leaves them: the kubelet applies the Pods' fsGroup to a local volume
// (never to a hostPath one), so these are the volumes on which its
// ownership changes show.
func localVolumes(t *testing.T, d *Driver, class string, n int, size int64) {
	t.Helper()
	makeVolumes(t, d, class, n, size, true)
}

func makeVolumes(t *testing.T, d *Driver, class string, n int, size int64, local bool) {
	t.Helper()
	add := testVolumes(t, d, class, storagev1.VolumeBindingImmediate)
	node := ""
	if local {
		nodes, err := d.cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node = d.localNode(t.Context(), nodes.Items); node == "" {
			t.Skip("local volumes need this host to be a node of the cluster")
		}
	}
	for i := range n {
		add(fmt.Sprintf("%s-%d", class, i), node, size, local)
	}
}

// testVolumes makes StorageClass class (no provisioner, binding mode mode,
// reclaim Retain) and returns add, which makes a PersistentVolume name of
// it, size bytes, in a new directory of this machine (uid 1000's, or
// root's when rootOwned): a local volume with node affinity to node, or a
// hostPath one when node is "". The class and its volumes are deleted
// when t ends.
func testVolumes(t *testing.T, d *Driver, class string, mode storagev1.VolumeBindingMode) (add func(name, node string, size int64, rootOwned bool)) {
	t.Helper()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{sandbox.LabelManaged: "test"}}
	}
	sc := &storagev1.StorageClass{
		ObjectMeta: meta(class), Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr(mode), ReclaimPolicy: ptr(corev1.PersistentVolumeReclaimRetain),
	}
	if _, err := d.cs.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create storage class %s: %v", class, err)
	}
	var names []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, name := range names {
			if err := d.cs.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete volume %s: %v", name, err)
			}
		}
		if err := d.cs.StorageV1().StorageClasses().Delete(ctx, class, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete storage class %s: %v", class, err)
		}
	})
	dir := t.TempDir()
	return func(name, node string, size int64, rootOwned bool) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if !rootOwned {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: meta(name),
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: quantity(size)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              class,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: p, Type: ptr(corev1.HostPathDirectory)},
				},
			},
		}
		if node != "" {
			pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: p}}
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}}
		}
		if _, err := d.cs.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create volume %s: %v", pv.Name, err)
		}
		names = append(names, pv.Name)
	}
}

// noHelperLeft fails the test for any workspace helper Pod left in d's
// namespace.
func noHelperLeft(t *testing.T, d *Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := d.cs.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: labelHelper})
	if err != nil {
		t.Errorf("list helper pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Errorf("helper pod %s (%s) outlived its call", p.Name, p.Labels[labelHelper])
	}
}

// harness is the suite's harness for d.
func harness(t *testing.T, d *Driver) drivertest.Harness {
	t.Helper()
	image := testImage(t, d)
	pids, err := d.PodPidsLimit(t.Context())
	if err != nil || pids == 0 {
		t.Fatalf("the nodes' podPidsLimit: %d, %v; want one (make k8s-up sets 512)", pids, err)
	}
	// Bounded workspaces are ext4 images on hostPath volumes; a claim of a
	// StorageClass is bounded by its provisioner, and this cluster's
	// static volumes are plain directories.
	var bound int64
	if d.hostDir != "" {
		bound = 32 << 20
	}
	// Pull's contract: an image the kubelet pulls from a registry on
	// loopback, and a tag that registry lacks (never a public registry).
	reg := startPullRegistry(t)
	pullRef, _ := reg.push(t, "agentd-test/pull-"+randHex(4)+":v1")
	timeout := 2 * time.Minute
	if d.agentdImage != "" {
		timeout = 4 * time.Minute // the init container's Pods start slower
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
		CannotPause:    noFreezer(nil) != "", // the freezer of this host's node, if it is one
		WorkspaceBytes: bound,                // FillWorkspace writes 64 MiB
		Timeout:        timeout,
	}
}
