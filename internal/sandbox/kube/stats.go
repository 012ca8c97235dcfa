package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// summary is the part of the kubelet's /stats/summary the driver reads
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1, whose module the product does
// not need for five fields).
type summary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		Containers []struct {
			Name string `json:"name"`
			CPU  *struct {
				Time                 time.Time `json:"time"`
				UsageCoreNanoSeconds *uint64   `json:"usageCoreNanoSeconds"`
			} `json:"cpu"`
			Memory *struct {
				WorkingSetBytes *uint64 `json:"workingSetBytes"`
			} `json:"memory"`
		} `json:"containers"`
		Network *struct {
			RxBytes *uint64 `json:"rxBytes"`
			TxBytes *uint64 `json:"txBytes"`
		} `json:"network"`
		ProcessStats *struct {
			ProcessCount *uint64 `json:"process_count"`
		} `json:"process_stats"`
	} `json:"pods"`
}

// statsWait bounds how long Stats waits for the kubelet to have a first
// sample of a Pod that has just started.
const statsWait = 20 * time.Second

// Stats samples the sandbox's Pod through its node's kubelet (the API
// server's node proxy: /stats/summary). Memory is the container's working
// set, processes the Pod's tasks (the pause process among them: the
// kubelet's count, or, when the hub runs on the node (hostPath mode), its
// pids cgroup's), the pids limit the cgroup's or else the node's
// podPidsLimit (Create refused a spec it would not bound).
func (d *Driver) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	if _, err := d.record(ctx, "stats of sandbox", id); err != nil {
		return sandbox.Stats{}, err
	}
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return sandbox.Stats{}, nil
	}
	if err != nil {
		return sandbox.Stats{}, d.fail("stats of sandbox "+id, err)
	}
	if cs := containerStatus(p); cs == nil || cs.State.Running == nil || p.Spec.NodeName == "" {
		return sandbox.Stats{}, nil
	}
	pidsLimit, err := d.podPidsLimit(ctx, p.Spec.NodeName)
	if err != nil {
		return sandbox.Stats{}, err
	}
	deadline := time.Now().Add(statsWait)
	for {
		s, ok, err := d.sample(ctx, p)
		if err != nil {
			return sandbox.Stats{}, err
		}
		if ok {
			if s.PidsLimit == 0 {
				s.PidsLimit = pidsLimit
			}
			return s, nil
		}
		if time.Now().After(deadline) {
			return sandbox.Stats{}, fmt.Errorf("stats of sandbox %s: node %s's kubelet has no sample of its pod after %s", id, p.Spec.NodeName, statsWait)
		}
		if err := d.sleep(ctx); err != nil {
			return sandbox.Stats{}, fmt.Errorf("stats of sandbox %s: %w", id, err)
		}
	}
}

// sample reads Pod p's figures from its node's summary; false when the
// kubelet has none yet.
func (d *Driver) sample(ctx context.Context, p *corev1.Pod) (sandbox.Stats, bool, error) {
	raw, err := d.cs.CoreV1().RESTClient().Get().Resource("nodes").Name(p.Spec.NodeName).
		SubResource("proxy").Suffix("stats/summary").DoRaw(ctx)
	if err != nil {
		return sandbox.Stats{}, false, d.fail("stats summary of node "+p.Spec.NodeName, err)
	}
	var sum summary
	if err := json.Unmarshal(raw, &sum); err != nil {
		return sandbox.Stats{}, false, fmt.Errorf("stats summary of node %s: %w", p.Spec.NodeName, err)
	}
	for _, ps := range sum.Pods {
		if ps.PodRef.Name != p.Name || ps.PodRef.Namespace != p.Namespace {
			continue
		}
		var s sandbox.Stats
		for _, c := range ps.Containers {
			if c.Name != container || c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil || c.Memory == nil || c.Memory.WorkingSetBytes == nil {
				continue
			}
			s.Read, s.CPUNanos = c.CPU.Time, *c.CPU.UsageCoreNanoSeconds
			s.MemoryBytes = clamp(*c.Memory.WorkingSetBytes)
		}
		if ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
			s.Pids = clamp(*ps.ProcessStats.ProcessCount)
		}
		// This host is the node (hostPath mode; or the Pod's cgroup is
		// here, whose name has the Pod's uid): its cgroup counts.
		if d.hostDir != "" || s.Pids == 0 {
			if cur, limit, ok := localPidsOf(p); ok {
				s.Pids, s.PidsLimit = cur, limit
			}
		}
		if ps.Network != nil && ps.Network.RxBytes != nil && ps.Network.TxBytes != nil {
			s.NetRxBytes, s.NetTxBytes = clamp(*ps.Network.RxBytes), clamp(*ps.Network.TxBytes)
		}
		if s.Read.IsZero() || s.MemoryBytes == 0 || s.Pids == 0 {
			return sandbox.Stats{}, false, nil
		}
		for _, c := range p.Spec.Containers {
			if c.Name == container {
				s.MemoryLimit = c.Resources.Limits.Memory().Value()
			}
		}
		return s, true, nil
	}
	return sandbox.Stats{}, false, nil
}

// kubeletConfig is the part of the kubelet's /configz the driver reads.
type kubeletConfig struct {
	KubeletConfig struct {
		PodPidsLimit *int64 `json:"podPidsLimit"`
	} `json:"kubeletconfig"`
}

// podPidsLimit is node's podPidsLimit as its kubelet runs with it (0: no
// limit), read once.
func (d *Driver) podPidsLimit(ctx context.Context, node string) (int64, error) {
	d.mu.Lock()
	n, ok := d.nodePids[node]
	d.mu.Unlock()
	if ok {
		return n, nil
	}
	raw, err := d.cs.CoreV1().RESTClient().Get().Resource("nodes").Name(node).
		SubResource("proxy").Suffix("configz").DoRaw(ctx)
	if err != nil {
		return 0, d.fail("kubelet configuration of node "+node, err)
	}
	var kc kubeletConfig
	if err := json.Unmarshal(raw, &kc); err != nil {
		return 0, fmt.Errorf("kubelet configuration of node %s: %w", node, err)
	}
	if kc.KubeletConfig.PodPidsLimit != nil && *kc.KubeletConfig.PodPidsLimit > 0 {
		n = *kc.KubeletConfig.PodPidsLimit
	}
	d.mu.Lock()
	d.nodePids[node] = n
	d.mu.Unlock()
	return n, nil
}

// checkPids says where a Pod with a pids limit of limit may run: "" when
// every schedulable node bounds a Pod's processes to at most limit (its
// kubelet's podPidsLimit; Kubernetes has no per-Pod limit); else this
// host's node, where the driver writes limit into the container's pids
// cgroup itself (setPids). It refuses limit when neither holds.
func (d *Driver) checkPids(ctx context.Context, limit int64) (string, error) {
	nodes, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", d.fail("list nodes", err)
	}
	some := false
	for _, n := range nodes.Items {
		if !d.eligible(&n) {
			continue
		}
		some = true
		got, err := d.podPidsLimit(ctx, n.Name)
		if err != nil {
			return "", err
		}
		if got == 0 || got > limit {
			if local := d.localNode(ctx, d.eligibleNodes(nodes.Items)); local != "" {
				return local, nil
			}
			what := "no podPidsLimit"
			if got > 0 {
				what = fmt.Sprintf("podPidsLimit %d", got)
			}
			return "", fmt.Errorf("pids limit %d: node %s's kubelet has %s; Kubernetes bounds a Pod's processes per node, so every node needs a podPidsLimit of at most the sandboxes' (the hub gives sandboxes 512), unless the hub runs on the sandbox's node and sets its container's limit itself", limit, n.Name, what)
		}
	}
	if !some {
		return "", fmt.Errorf("no node among %s", d.placementNote())
	}
	return "", nil
}

func clamp(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

// PodPidsLimit is the smallest podPidsLimit of the nodes the driver's Pods
// may run on (0: one has none): the pids limit a spec may name.
func (d *Driver) PodPidsLimit(ctx context.Context) (int64, error) {
	nodes, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, d.fail("list nodes", err)
	}
	var least int64 = -1
	for _, n := range nodes.Items {
		if !d.eligible(&n) {
			continue
		}
		got, err := d.podPidsLimit(ctx, n.Name)
		if err != nil {
			return 0, err
		}
		if got == 0 {
			return 0, nil
		}
		if least < 0 || got < least {
			least = got
		}
	}
	return max(least, 0), nil
}
