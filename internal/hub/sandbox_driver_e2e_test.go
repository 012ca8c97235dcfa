package hub_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube/kubetest"
	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// The hub's sandbox e2e tests run on the Docker engine, or, with
// AGENTD_SANDBOX_DRIVER=kubernetes and AGENTD_KUBECONFIG (make test-kube),
// on the Kubernetes driver against a real cluster: each hub gets a
// namespace of its own, hostPath workspaces in the test's temporary
// directory, the nodes' podPidsLimit and the base image as the cluster's
// node has it. What a test needs that a driver may lack, it asks for with
// require, which asks the driver (not a list of what Kubernetes cannot
// do), so the skips lift when the driver gains the capability.

// e2eDriverEnv selects the driver of the hub e2e tests.
const e2eDriverEnv = "AGENTD_SANDBOX_DRIVER"

// onKube reports whether the hub e2e tests run on the Kubernetes driver.
func onKube() bool { return os.Getenv(e2eDriverEnv) == "kubernetes" }

// kubeDriverHub is what a hub on the Kubernetes driver needs beyond Docker's.
type kubeDriverHub struct {
	drv   *kube.Driver
	cs    kubernetes.Interface // the cluster's admin
	ns    string
	dir   string // the hub's directory: socket/, sandbox-keys/, ws/
	image string // the base image's id on the node
	pids  int64  // the nodes' podPidsLimit
	admin string // the admin's kubeconfig
	kc    string // the kubeconfig of the namespace's ServiceAccount agenthub, the driver's
	log   *zap.Logger
}

// startKube makes a namespace (deleted when t ends, with the cluster-wide
// hostPath volumes the driver made for it) and a driver on it. It skips
// t, saying how to start one, when no cluster is configured.
func startKube(t *testing.T) *kubeDriverHub {
	t.Helper()
	return startKubeWith(t, nil)
}

// startKubeWith is startKube with the driver's options tuned (an agentd
// image, a start timeout, a probe image) once the namespace is made.
func startKubeWith(t *testing.T, tune func(k *kubeDriverHub, o *kube.Options)) *kubeDriverHub {
	t.Helper()
	admin, cs := kubetest.Admin(t) // skips without a cluster
	if os.Geteuid() != 0 {
		t.Skip("the hostPath workspaces are made owned by uid 1000: run as root")
	}
	k := &kubeDriverHub{cs: cs, dir: t.TempDir(), admin: admin, log: zaptest.NewLogger(t).Named("kube")}
	// The sandbox's host directories are below it (socket, keys), and
	// workspaces in ws/.
	if err := os.Chmod(k.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The namespace as docs/deploy.md sets it up; the hub is its
	// ServiceAccount, with the documented grant alone.
	ns, kc := kubetest.Namespace(t, cs, admin, "agentd-hub")
	k.ns, k.kc = ns, kc
	t.Cleanup(func() { k.deleteVolumes(t) }) // before kubetest deletes the namespace
	// After the hub's clean-up: a bounded workspace a failed test left
	// mounted is unmounted and detached, by path, before its directory
	// goes.
	t.Cleanup(func() { k.releaseBounded(t) })
	o := kube.Options{Kubeconfig: kc, Namespace: k.ns, HostPathDir: k.wsDir(), Logger: k.log}
	if tune != nil {
		tune(k, &o)
	}
	var err error
	k.drv, err = kube.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.drv.Close() })
	img, err := k.drv.Image(t.Context(), sandbox.BaseImage)
	if errors.Is(err, sandbox.ErrNotFound) {
		t.Skipf("%s is not on the cluster's node: K8S_IMAGES of make k8s-up imports it from the local engine", sandbox.BaseImage)
	}
	if err != nil {
		t.Fatal(err)
	}
	k.image = img.ID
	if k.pids, err = k.drv.PodPidsLimit(t.Context()); err != nil || k.pids == 0 {
		t.Fatalf("the nodes' podPidsLimit: %d %v; want one (make k8s-up sets 512)", k.pids, err)
	}
	return k
}

// wsDir is the driver's HostPathDir; the namespace's workspaces are in
// its directory of the namespace's name.
func (k *kubeDriverHub) wsDir() string { return filepath.Join(k.dir, "ws") }

// releaseBounded unmounts and detaches the bounded workspaces left in the
// namespace's directory (the driver's Remove releases them; a test that
// failed before it did not).
func (k *kubeDriverHub) releaseBounded(t *testing.T) {
	imgs, _ := filepath.Glob(filepath.Join(k.wsDir(), k.ns, "*.img"))
	for _, img := range imgs {
		loop := loopfs.LoopOf(img, strings.TrimSuffix(img, ".img")+".dev")
		if loop == "" {
			continue
		}
		if mp, _ := loopfs.MountOf(loop); mp != "" {
			if err := loopfs.Unmount(mp); err != nil {
				t.Error(err)
			}
		}
		if err := loopfs.Detach(loop); err != nil {
			t.Error(err)
		}
	}
}

// options are the hub's sandbox options on the cluster: startSandboxHub's
// Docker limits but the node's pids bound (the driver refuses a lower one)
// and a longer start (a Pod's claim binds in up to 15 s here).
func (k *kubeDriverHub) options(agentd string) sandboxes.Options {
	socket := filepath.Join(k.dir, "socket")
	_ = os.MkdirAll(socket, 0o755)
	return sandboxes.Options{
		Driver:         k.drv,
		AgentdDir:      agentd,
		SocketDir:      socket,
		BaseImage:      k.image,
		BuiltinNetwork: "none",
		StartTimeout:   2 * time.Minute,
		Limits:         sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: k.pids, TmpBytes: 64 << 20, HomeBytes: 64 << 20},
	}
}

// deleteVolumes deletes the hostPath volumes of the namespace's claims that
// the hub left (PersistentVolumes are cluster-wide; the driver names them
// agentd-NAMESPACE-CLAIM), after the hub's sandboxes were removed.
func (k *kubeDriverHub) deleteVolumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pvs, err := k.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("list persistent volumes: %v", err)
		return
	}
	for _, pv := range pvs.Items {
		if strings.HasPrefix(pv.Name, "agentd-"+k.ns+"-") {
			t.Logf("deleting persistent volume %s the hub left", pv.Name)
			if err := k.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete persistent volume %s: %v", pv.Name, err)
			}
		}
	}
}

// A capability is something a test needs that not every driver has.
type capability int

const (
	// capPause: a freezer (Pause keeps the processes, in memory).
	capPause capability = iota
	// capNetwork: sandboxes on a network other than none (the hub's
	// PublicNetwork).
	capNetwork
	// capGVisor: gVisor's runtime for sandboxes of network none.
	capGVisor
	// capPull: the driver pulls images (custom environments from a
	// registry).
	capPull
	// capLimits: the hub's Limits as the test set them (a pids limit
	// below the nodes' podPidsLimit is refused on Kubernetes). Asked
	// each time: it depends on the limits.
	capLimits
	// capEngine: the test brings a docker.Driver of its own, with options
	// only Docker has (a registry's Fetch). Faults made behind the hub's
	// back (a kill, a removal, the engine gone) need not ask: the hooks
	// of sandbox_driver_faults_test.go do them on either driver.
	capEngine
)

// driverAnswers caches what a driver kind said to a probe that costs a
// sandbox (Pause needs one that exists): kind → capability → why not ("":
// it can).
var driverAnswers struct {
	sync.Mutex
	m map[string]map[capability]string
}

// require skips t, saying why, unless the hub's driver has c.
func (h *sandboxHub) require(t *testing.T, c capability) {
	t.Helper()
	if why := h.lacks(t, c); why != "" {
		t.Skip(why)
	}
}

// lacks says why the hub's driver cannot do c ("": it can), by asking it.
func (h *sandboxHub) lacks(t *testing.T, c capability) string {
	t.Helper()
	if _, ok := h.driver.(*docker.Driver); ok {
		return "" // gVisor on Docker: RequireIsolation, before the hub
	}
	switch c {
	case capEngine:
		return "the test brings a docker.Driver of its own, with options only Docker has; no version for " + kindOf(h.driver) + " is written"
	case capPull:
		// An address nothing listens on: a driver that pulls fails
		// otherwise; one that cannot says so.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := h.driver.Pull(ctx, "127.0.0.1:1/agentd-probe/none:1"); errors.Is(err, sandbox.ErrNotSupported) {
			return "the driver does not pull images: " + err.Error()
		}
		return ""
	case capGVisor:
		rts, err := h.driver.Runtimes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rts[sandbox.RuntimeGVisor]; !ok {
			return "gVisor: the cluster has no RuntimeClass " + sandbox.RuntimeGVisor + " (docs/kubernetes.md, gVisor)"
		}
		return ""
	}
	if c == capLimits {
		return h.probe(t, c)
	}
	kind := kindOf(h.driver)
	driverAnswers.Lock()
	defer driverAnswers.Unlock()
	if why, ok := driverAnswers.m[kind][c]; ok {
		return why
	}
	why := h.probe(t, c)
	if driverAnswers.m == nil {
		driverAnswers.m = map[string]map[capability]string{}
	}
	if driverAnswers.m[kind] == nil {
		driverAnswers.m[kind] = map[capability]string{}
	}
	driverAnswers.m[kind][c] = why
	return why
}

// probe asks the driver with a sandbox of its own, created and removed.
func (h *sandboxHub) probe(t *testing.T, c capability) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	spec := sandbox.Spec{
		Name: "agentd-probe-" + randomLower(8), Image: h.opts.BaseImage, Cmd: []string{"sleep", "60"},
		Network: "none", Limits: h.opts.Limits,
		Labels: map[string]string{sandbox.LabelManaged: "probe"},
	}
	if c == capNetwork {
		spec.Network = h.opts.PublicNetwork
		if spec.Network == "" {
			spec.Network = "public"
		}
	}
	id, err := h.driver.Create(ctx, spec)
	if err != nil && c == capNetwork {
		return "the driver refuses a sandbox on a network: " + err.Error()
	}
	if err != nil && c == capLimits {
		return fmt.Sprintf("the driver refuses the test's limits %+v: %v", spec.Limits, err)
	}
	if err != nil {
		t.Fatalf("probe sandbox: %v", err)
	}
	defer func() {
		if err := h.driver.Remove(context.WithoutCancel(ctx), id); err != nil {
			t.Errorf("remove the probe sandbox: %v", err)
		}
	}()
	if c != capPause {
		return ""
	}
	if err := h.driver.Pause(ctx, id); errors.Is(err, sandbox.ErrNotSupported) {
		return "the driver cannot pause (the hub stops instead): " + err.Error()
	}
	return ""
}

// kindOf names a driver's type, for messages and the probe cache.
func kindOf(d sandbox.Driver) string {
	switch d.(type) {
	case *docker.Driver:
		return "docker"
	case *kube.Driver:
		return "kubernetes"
	}
	return "another driver"
}

// nanoCPUs is the CPU limit the engine holds for a sandbox's container, in
// billionths of a CPU: Docker's HostConfig.NanoCpus, the Pod's container
// limit on Kubernetes.
func (h *sandboxHub) nanoCPUs(containerID string) (string, error) {
	if h.kube == nil {
		out, err := exec.CommandContext(h.t.Context(), "docker", "inspect", "-f", "{{.HostConfig.NanoCpus}}", containerID).Output()
		return strings.TrimSpace(string(out)), err
	}
	p, err := h.kube.cs.CoreV1().Pods(h.kube.ns).Get(h.t.Context(), containerID, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue()*1_000_000, 10), nil
}
