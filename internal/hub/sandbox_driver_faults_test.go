package hub_test

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube/kubetest"
)

// The fault hooks: what the fault tests do to a sandbox behind the hub's
// back, on either driver, so that one test body runs on Docker and on
// Kubernetes. Each does on Kubernetes what the Docker command does to a
// container: a kill kills the processes, a removal leaves the workspace,
// and the engine goes away by a proxy in front of it closing, never by
// touching the engine (the cluster is shared).

// killContainer kills every process of a sandbox's container with
// SIGKILL, as docker kill does. On Kubernetes: the processes of the Pod's
// sandbox container, found by its container id in their cgroups (the node
// is this machine); the container exits 137, as a killed one does.
func (h *sandboxHub) killContainer(containerID string) {
	h.t.Helper()
	if h.kube == nil {
		if out, err := exec.CommandContext(h.t.Context(), "docker", "kill", containerID).CombinedOutput(); err != nil {
			h.t.Fatalf("docker kill: %v: %s", err, out)
		}
		return
	}
	k, t := h.kube, h.t
	p, err := k.cs.CoreV1().Pods(k.ns).Get(t.Context(), containerID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's pod: %v", err)
	}
	var cid string
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == p.Spec.Containers[0].Name && cs.State.Running != nil {
			_, cid, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if cid == "" {
		t.Fatalf("pod %s: its container does not run: %+v", containerID, p.Status.ContainerStatuses)
	}
	pids := cgroupPids(t, cid)
	if len(pids) == 0 {
		t.Fatalf("pod %s: no process of this machine is in container %s's cgroup (is the node another machine?)", containerID, cid)
	}
	for _, pid := range pids {
		proc, err := os.FindProcess(pid)
		if err == nil {
			err = proc.Kill() // SIGKILL
		}
		if err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatalf("kill %d of pod %s: %v", pid, containerID, err)
		}
	}
	t.Logf("killed pod %s's processes %v (container %.12s)", containerID, pids, cid)
}

// cgroupPids are the processes whose cgroup path names container id.
func cgroupPids(t *testing.T, id string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "/"+id) {
			continue // gone meanwhile, or another's
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeContainer removes a sandbox's container outside the hub, as
// docker rm -f does, its workspace left. On Kubernetes: its Pod (grace 0)
// and its record, the Secret the driver knows a sandbox by; the claim
// stays, as the volume does.
func (h *sandboxHub) removeContainer(containerID string) {
	h.t.Helper()
	if h.kube == nil {
		if out, err := exec.CommandContext(h.t.Context(), "docker", "rm", "-f", containerID).CombinedOutput(); err != nil {
			h.t.Fatalf("docker rm -f: %v %s", err, out)
		}
		return
	}
	h.kube.deletePod(h.t, containerID, 0)
	secrets := h.kube.cs.CoreV1().Secrets(h.kube.ns)
	if err := secrets.Delete(h.t.Context(), containerID, metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("delete sandbox %s's record: %v", containerID, err)
	}
	pollUntil(h.t, time.Minute, "sandbox "+containerID+"'s record deleted", func() (bool, string) {
		_, err := secrets.Get(h.t.Context(), containerID, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// stopContainer stops a sandbox's container outside the hub, as docker
// stop -t 1 does (the host shut it down). On Kubernetes: its Pod deleted
// with a second's grace.
func (h *sandboxHub) stopContainer(containerID string) {
	h.t.Helper()
	if h.kube == nil {
		if out, err := exec.CommandContext(h.t.Context(), "docker", "stop", "-t", "1", containerID).CombinedOutput(); err != nil {
			h.t.Fatalf("docker stop: %v %s", err, out)
		}
		return
	}
	h.kube.deletePod(h.t, containerID, 1)
}

// deletePod deletes a Pod with grace seconds and waits until it is gone.
func (k *kubeDriverHub) deletePod(t *testing.T, name string, grace int64) {
	t.Helper()
	pods := k.cs.CoreV1().Pods(k.ns)
	if p, err := pods.Get(t.Context(), name, metav1.GetOptions{}); err == nil {
		kubetest.ThawPod(string(p.UID)) // a paused one's tasks take no signal until thawed
	}
	if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s: %v", name, err)
	}
	pollUntil(t, 2*time.Minute, "pod "+name+" gone", func() (bool, string) {
		_, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// hasWorkspace reports whether the driver lists a workspace (a Docker
// volume, a Kubernetes claim) of the sandbox.
func (h *sandboxHub) hasWorkspace(id string) bool {
	h.t.Helper()
	vols, err := h.driver.Volumes(h.t.Context(), map[string]string{sandbox.LabelID: id})
	if err != nil {
		h.t.Fatalf("sandbox %s's workspace: %v", id, err)
	}
	return len(vols) > 0
}

// within is d on Docker and six times d on Kubernetes, whose Pods start
// and go in seconds where containers take a fraction of one.
func (h *sandboxHub) within(d time.Duration) time.Duration {
	if h.kube != nil {
		return 6 * d
	}
	return d
}

// orphan makes, with drv directly, a running sandbox that carries hubID's
// labels but that no hub knows, of the hub's base image and within the
// driver's limits (startOrphan's, but the nodes' pids bound on
// Kubernetes).
func (h *sandboxHub) orphan(drv sandbox.Driver, hubID string) string {
	h.t.Helper()
	image := h.opts.BaseImage
	if image == "" {
		image = sandbox.BaseImage
	}
	limits := sandbox.Limits{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 16, TmpBytes: 1 << 20, HomeBytes: 1 << 20}
	if h.kube != nil {
		limits.Pids = h.kube.pids
	}
	return startOrphan(h.t, drv, hubID, image, limits)
}

// engineCut is a driver of the hub's kind that reaches the hub's engine
// only through a proxy the test opens (restore) and closes (cut): the
// engine gone and back without touching it. On Docker the proxy is a unix
// socket in front of the engine's; on Kubernetes a TCP port in front of
// the API server, which a copy of the driver's kubeconfig names.
type engineCut struct {
	t   *testing.T
	drv sandbox.Driver
	// addr is the engine's address as drv's errors name it.
	addr string
	// network, at and to: where the proxy listens, and what it forwards to.
	network, at, to string
	p               *sockProxy
}

// cutEngine returns the hub's kind of driver with its engine cut off
// (no proxy listens yet).
func (h *sandboxHub) cutEngine() *engineCut {
	t := h.t
	t.Helper()
	c := &engineCut{t: t}
	h.engineCut = c
	if h.kube == nil {
		sock := filepath.Join(t.TempDir(), "docker.sock")
		c.network, c.at, c.to, c.addr = "unix", sock, engineSocket(t), "unix://"+sock
		d, err := docker.New(docker.Options{Host: c.addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		c.drv = d
		return c
	}
	k := h.kube
	cfg, err := clientcmd.LoadFromFile(k.kc)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0") // a free port; free again until restore
	if err != nil {
		t.Fatal(err)
	}
	c.network, c.at = "tcp", lis.Addr().String()
	lis.Close()
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			t.Fatal(err)
		}
		c.to = u.Host
		u.Host = c.at // the API server's certificate names 127.0.0.1, whatever the port
		cl.Server = u.String()
		c.addr = cl.Server
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	d, err := kube.New(kube.Options{Kubeconfig: path, Namespace: k.ns, HostPathDir: k.wsDir(), Logger: k.log.Named("cut")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c.drv = d
	return c
}

// restore starts forwarding: the engine answers again.
func (c *engineCut) restore() { c.p = startProxy(c.t, c.network, c.at, c.to) }

// cut closes the proxy and every connection through it.
func (c *engineCut) cut() { c.p.Close() }

// startSandboxHubOn is startSandboxHubWith whose tune also gets the
// sandboxHub (its driver, its cluster namespace) before the hub starts;
// a driver from h.cutEngine may replace the hub's (the same kind).
func startSandboxHubOn(t *testing.T, tune func(h *sandboxHub, o *sandboxes.Options)) *sandboxHub {
	t.Helper()
	return startSandboxHubTuned(t, tune, hubtest.Options{})
}
