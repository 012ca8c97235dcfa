package kube

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/drivertest"
)

// The tests here need a second node: scripts/k8s-node.sh add (make
// k8s-node-add) makes one on this machine, tainted secondTaint, labelled
// nodeLabel=NAME, with no NetworkPolicy enforcer (network-none sandboxes
// only). docs/kubernetes.md, "A second node".

const (
	secondTaint = "agentd.test/second-node"
	nodeLabel   = "agentd.test/node"
	hostLabel   = "kubernetes.io/hostname"
)

// nodes returns the second node's name (the one tainted secondTaint) and
// another's; it skips the test when there is no second node.
func nodes(t *testing.T, d *Driver) (second, first string) {
	t.Helper()
	list, err := d.cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == secondTaint }) {
			second = n.Name
		} else if first == "" {
			first = n.Name
		}
	}
	if second == "" || first == "" {
		t.Skip("no second node (taint " + secondTaint + "): `make k8s-node-add` (scripts/k8s-node.sh add agentd-k8s-2) adds one to make k8s-up's cluster")
	}
	return second, first
}

// onSecond places a driver's Pods on node (the second): its selector and
// the toleration of its taint.
func onSecond(node string) func(*Options) {
	return func(o *Options) {
		o.NodeSelector = map[string]string{nodeLabel: node}
		o.Tolerations = []corev1.Toleration{{Key: secondTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
}

// tolerateSecond lets a driver's Pods onto the second node without
// requiring it: the scheduler chooses.
func tolerateSecond(o *Options) {
	o.Tolerations = []corev1.Toleration{{Key: secondTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
}

// clusterAgentdImage turns on the init-container mode with the agentd
// image make k8s-up built and k8s-node.sh imported on the second node too
// (sandboxtest.KubeAgentdImage imports this tree's into node 1 only).
func clusterAgentdImage(t *testing.T) func(*Options) {
	return func(o *Options) {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(o.Kubeconfig), "agentd-image"))
		if err != nil {
			t.Skipf("the cluster's agentd image: %v (make k8s-up writes it beside the kubeconfig)", err)
		}
		o.AgentdImage = strings.TrimSpace(string(b))
		o.HubAdvertise = nodeAddr + ":9" // nothing dials it: the sandboxes run sh
	}
}

// localClass makes StorageClass class (no provisioner, binding when a Pod
// is scheduled, reclaim Retain) and, for each node in perNode, that many
// local PersistentVolumes with node affinity to it, in directories owned
// by uid 1000 on this machine (every node's here); all deleted at the end.
func localClass(t *testing.T, d *Driver, class string, size int64, perNode map[string]int) {
	t.Helper()
	add := testVolumes(t, d, class, storagev1.VolumeBindingWaitForFirstConsumer)
	for node, n := range perNode {
		for i := range n {
			add(fmt.Sprintf("%s-%s-%d", class, node, i), node, size, false)
		}
	}
}

// podNode is the node sandbox id's Pod was scheduled to ("" before).
func podNode(t *testing.T, d *Driver, id string) string {
	t.Helper()
	p, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s: %v", id, err)
	}
	return p.Spec.NodeName
}

// volumeNode is the node of the local volume sandbox id's claim is bound to.
func volumeNode(t *testing.T, d *Driver, id string) string {
	t.Helper()
	c, err := d.cs.CoreV1().PersistentVolumeClaims(d.ns).Get(t.Context(), claimName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim of %s: %v", id, err)
	}
	pv, err := d.cs.CoreV1().PersistentVolumes().Get(t.Context(), c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("volume %q of %s: %v", c.Spec.VolumeName, id, err)
	}
	return pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0]
}

// workspaceFiles exports sandbox id's workspace and returns its regular
// files' contents by name.
func workspaceFiles(t *testing.T, d *Driver, id string) map[string]string {
	t.Helper()
	rc, err := d.ExportWorkspace(t.Context(), id)
	if err != nil {
		t.Fatalf("ExportWorkspace %s: %v", id, err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("export of %s: %v", id, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	}
}

// twiceScript writes f on its first run and again on the next (the
// workspace kept), then exits 0.
const twiceScript = `if [ -e /workspace/f ]; then echo again > /workspace/again; else echo one > /workspace/f; fi`

// A sandbox placed on the second node (its selector and toleration), in
// the init-container mode (agentd from an image, no hostPath: the hub's
// host does not own that node), its workspace a claim of a class of local
// volumes on both nodes: it runs there, writes a file, is stopped (Pod
// deleted, claim kept), starts again on the same node with the file, and
// its workspace is read by a helper Pod that the scheduler must put on
// that node too (no Pod to follow: the placement and the volume's
// affinity bring it there).
func TestMultiNodePlacedSandbox(t *testing.T) {
	class := "agentd-local-" + randHex(4)
	d := newCluster(t, Options{StorageClass: class}, clusterAgentdImage(t))
	second, first := nodes(t, d)
	d = newCluster(t, Options{StorageClass: class}, clusterAgentdImage(t), onSecond(second))
	localClass(t, d, class, 64<<20, map[string]int{first: 2, second: 2})
	// After Remove (cleanups run last first): the export's helper is
	// deleted once its stream ends, and Remove waits for the claim.
	t.Cleanup(func() { noHelperLeft(t, d) })

	s := testSpec(t, d, "agentd-mn-placed", nil)
	s.Cmd = []string{"sh", "-c", twiceScript}
	id := create(t, d, s)
	for run := 1; run <= 2; run++ {
		t0 := time.Now()
		if err := d.Start(t.Context(), id); err != nil {
			t.Fatalf("Start (run %d): %v", run, err)
		}
		started := time.Since(t0)
		if got := podNode(t, d, id); got != second {
			t.Fatalf("run %d: scheduled to %q, want the second node %q", run, got, second)
		}
		if in := awaitExited(t, d, id); in.ExitCode != 0 {
			t.Fatalf("run %d: exit %d (%s), want 0", run, in.ExitCode, in.Error)
		}
		t.Logf("run %d on %s: Start %.1f s, exited %.1f s after Start", run, second, started.Seconds(), time.Since(t0).Seconds())
		t0 = time.Now()
		if err := d.Stop(t.Context(), id, time.Second); err != nil {
			t.Fatalf("Stop (run %d): %v", run, err)
		}
		if _, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("run %d: after Stop the Pod: %v; want it gone", run, err)
		}
		if got := volumeNode(t, d, id); got != second {
			t.Fatalf("run %d: the claim is bound to a volume of %q, want %q", run, got, second)
		}
		t.Logf("run %d: Stop %.1f s", run, time.Since(t0).Seconds())
	}
	t0 := time.Now()
	got := workspaceFiles(t, d, id)
	t.Logf("export through a helper Pod on %s: %.1f s", second, time.Since(t0).Seconds())
	if got["f"] != "one\n" || got["again"] != "again\n" {
		t.Errorf("workspace after two runs: %q; want f=one and again=again (the second run saw the first's file)", got)
	}
}

// An image only node 1 has: a driver whose Pods must go to the second node
// refuses it at Create (no node it may use has it); a driver that may use
// either node accepts the image (node 1 has it), but when the sandbox's
// claim is bound to a volume of the second node (the only volumes of its
// class there), the scheduler follows the volume: the helper that makes
// the new claim the sandbox user's runs the image there, and Create fails
// with the kubelet's ErrImageNeverPull, naming the node, and leaves
// nothing. A placement that tolerates nothing cannot reach the second node
// at all.
func TestMultiNodeImageOnOneNode(t *testing.T) {
	class := "agentd-local-" + randHex(4)
	d := newCluster(t, Options{StorageClass: class}, tolerateSecond)
	second, first := nodes(t, d)
	localClass(t, d, class, 64<<20, map[string]int{second: 1})
	only := nodeOneImage(t, d, first)

	s := testSpec(t, d, "agentd-mn-image", nil)
	s.Image = only
	t0 := time.Now()
	_, err := d.Create(t.Context(), s)
	if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") || !strings.Contains(err.Error(), "on node "+second) {
		t.Fatalf("Create of an image node %s lacks, on a claim of %s's: %v; want ErrImageNeverPull naming %s", second, second, err, second)
	}
	t.Logf("refused after %.1f s: %v", time.Since(t0).Seconds(), err)
	if in, err := d.Inspect(t.Context(), s.Name); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Inspect after the failed Create: %+v, %v; want ErrNotFound", in, err)
	}
	if vols, err := d.Volumes(t.Context(), map[string]string{labelSandbox: s.Name}); err != nil || len(vols) != 0 {
		t.Errorf("workspaces after the failed Create: %v, %v; want none", vols, err)
	}

	placed := newCluster(t, Options{StorageClass: class}, onSecond(second))
	ps := testSpec(t, placed, "agentd-mn-image2", nil)
	ps.Image = only
	if _, err := placed.Create(t.Context(), ps); !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "selector "+nodeLabel+"="+second) {
		t.Errorf("Create with an image only %s has, placed on %s: %v; want ErrNotFound naming the placement", first, second, err)
	}

	untolerated := newCluster(t, Options{StorageClass: class}, func(o *Options) { o.NodeSelector = map[string]string{nodeLabel: second} })
	us := testSpec(t, d, "agentd-mn-untol", nil) // d's pids limit: untolerated has no node for one
	if _, err := untolerated.Create(t.Context(), us); err == nil || !strings.Contains(err.Error(), "may run on") {
		t.Errorf("Create with a selector for the tainted node and no toleration: %v; want refused (no node the Pods may run on)", err)
	}
}

// nodeOneImage tags the test image under a name of its own in node 1's
// containerd (make k8s-up's, beside the kubeconfig), waits until node 1
// lists it, and removes the tag when the test ends; the second node never
// has it.
func nodeOneImage(t *testing.T, d *Driver, first string) string {
	t.Helper()
	base := testImage(t, d)
	sock := filepath.Join(filepath.Dir(kubeconfig()), "containerd", "containerd.sock")
	if _, err := os.Stat(sock); err != nil {
		t.Skipf("node 1's containerd socket: %v", err)
	}
	ctr := func(args ...string) string {
		out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", "k8s.io", "images"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr images %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	var src string
	for _, name := range strings.Fields(ctr("ls", "-q")) {
		if slices.Contains(candidates(base), name) {
			src = name
		}
	}
	if src == "" {
		t.Fatalf("node 1's containerd has no %s", base)
	}
	ref := "agentd-test/node1-only:" + randHex(4)
	ctr("tag", src, "docker.io/"+ref)
	t.Cleanup(func() { ctr("rm", "docker.io/"+ref) })
	t0 := time.Now()
	for {
		n, err := d.cs.CoreV1().Nodes().Get(t.Context(), first, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(n.Status.Images, func(img corev1.ContainerImage) bool { return slices.Contains(img.Names, "docker.io/"+ref) }) {
			t.Logf("node %s listed %s %.1f s after the tag", first, ref, time.Since(t0).Seconds())
			return ref
		}
		if err := d.sleep(t.Context()); err != nil {
			t.Fatalf("node %s never listed %s: %v", first, ref, err)
		}
	}
}

// The conformance suite with every sandbox on the second node: init
// container, workspaces on local volumes of that node, no freezer (its
// cgroups are not this host's: Pause refused, as on any node but the
// hub's). One contract fails there (docs/kubernetes.md, "A second node"):
// Stats, which has no process count off the hub's host on cgroup v1.
func TestConformanceSecondNode(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		class := "agentd-local-" + randHex(4)
		d := newCluster(t, Options{StorageClass: class}, clusterAgentdImage(t))
		second, _ := nodes(t, d)
		d = newCluster(t, Options{StorageClass: class}, clusterAgentdImage(t), onSecond(second))
		localClass(t, d, class, 64<<20, map[string]int{second: 48})
		t.Cleanup(func() { noHelperLeft(t, d) })
		h := harness(t, d)
		h.CannotPause = true
		return h
	})
}
