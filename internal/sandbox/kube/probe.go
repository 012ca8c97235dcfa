package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyProbe is what ProbePolicy found.
type PolicyProbe struct {
	// Enforced: a Pod under a deny-all egress policy could not reach a
	// listener that a Pod under no policy reached.
	Enforced bool
	// Target is the listener the probe Pods dialled (the node's address).
	Target string
	// Err, when set, is why the probe could not tell (Enforced is false).
	Err error
	// At is when the probe ended; Took how long it ran.
	At   time.Time
	Took time.Duration
}

// Refusal is nil when the probe found NetworkPolicy enforced; else the
// error a sandbox of network public gets (errors.Is ErrNotEnforced).
func (p PolicyProbe) Refusal() error {
	switch {
	case p.Enforced:
		return nil
	case p.Err != nil:
		return fmt.Errorf("network public is refused: whether the cluster's CNI enforces NetworkPolicy is unknown (%w: the probe failed: %v)", ErrNotEnforced, p.Err)
	default:
		return fmt.Errorf("network public is refused: %w (a probe Pod under a deny-all egress policy reached %s), so a public sandbox's egress policy would not keep it off private addresses and the node; run a CNI that enforces policy (Calico, Cilium; on the local cluster, make k8s-up starts kube-router's firewall)", ErrNotEnforced, p.Target)
	}
}

// probeTimeout bounds one probe: two Pods start, dial for 6 to 42 s and
// exit. A Pod's sandbox took up to 100 s to start on this
// machine's busy cluster.
const probeTimeout = 3 * time.Minute

// probeScript dials $TARGET (host port) 12 times, half a second apart,
// each dial bounded to 3 s, whatever the answers, and judges by the last
// four: a new Pod's first dials may fail before its network is up, or
// connect before a policy controller has programmed its rules, so only
// the end counts. MODE deny exits 7 when the last four all failed (0 when
// the last connected, 3 when it cannot tell); MODE open exits 0 when the
// last four all connected (7 otherwise). Both Pods run the same window, so
// a network that is merely slow fails the open one too.
const probeScript = `set -u; h=${TARGET% *}; p=${TARGET#* }; ok=0; failed=0
for i in $(seq 12); do
  if timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$h" "$p" 2>/dev/null; then
    ok=$((ok + 1)); failed=0; last=ok
  else
    failed=$((failed + 1)); ok=0; last=failed
  fi
  sleep 0.5
done
if [ "$MODE" = open ]; then [ "$ok" -ge 4 ] && exit 0; exit 7; fi
[ "$failed" -ge 4 ] && exit 7
[ "$last" = ok ] && exit 0
exit 3`

// LastPolicyProbe is ProbePolicy's last result; ok is false before the
// first.
func (d *Driver) LastPolicyProbe() (p PolicyProbe, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.probed, !d.probed.At.IsZero()
}

// ProbePolicy finds out whether the cluster enforces NetworkPolicy, by
// trying: the driver listens on TCP on the node's address (the hub runs on
// the node, as with hostPath workspaces), and two short-lived Pods of the
// probe image dial it, one under a deny-all egress policy and one under
// none. Enforced when the first is blocked and the second connects; when
// the second cannot connect either, the probe cannot tell (Err). It takes
// seconds; the result is kept (LastPolicyProbe) and the Pods and policy
// are deleted. Concurrent calls run one probe after another.
func (d *Driver) ProbePolicy(ctx context.Context) (PolicyProbe, error) {
	d.probeMu.Lock()
	defer d.probeMu.Unlock()
	start := time.Now()
	var p PolicyProbe
	p.Enforced, p.Target, p.Err = d.probe(ctx)
	p.At = time.Now()
	p.Took = p.At.Sub(start)
	if ctx.Err() != nil && p.Err != nil {
		return p, p.Err // cancelled: the last result stands
	}
	d.mu.Lock()
	d.probed = p
	d.mu.Unlock()
	d.log.Info("network policy probe", zap.Bool("enforced", p.Enforced), zap.String("target", p.Target),
		zap.Duration("took", p.Took), zap.Error(p.Err))
	return p, p.Err
}

func (d *Driver) probe(ctx context.Context) (enforced bool, target string, err error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	ip, err := d.nodeAddr(ctx)
	if err != nil {
		return false, "", err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return false, "", fmt.Errorf("listen on the node's address %s (the probe needs the hub on a node): %w", ip, err)
	}
	defer ln.Close()
	target = ln.Addr().String()
	var dialled atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialled.Add(1)
			_ = c.Close()
		}
	}()

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := "agentd-netprobe-" + hex.EncodeToString(b)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{labelProbe: id}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelProbe: id, labelProbeMode: "deny"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}
	pols := d.cs.NetworkingV1().NetworkPolicies(d.ns)
	if _, err := pols.Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return false, target, d.fail("create the probe's network policy", err)
	}
	pods := d.cs.CoreV1().Pods(d.ns)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		zero := int64(0)
		sel := metav1.ListOptions{LabelSelector: labelProbe + "=" + id}
		if err := pods.DeleteCollection(cctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
			d.log.Warn("delete the probe's pods", zap.String("probe", id), zap.Error(err))
		}
		if err := pols.Delete(cctx, id, metav1.DeleteOptions{}); err != nil {
			d.log.Warn("delete the probe's network policy", zap.String("probe", id), zap.Error(err))
		}
	}()
	host, port, _ := net.SplitHostPort(target)
	for _, mode := range []string{"deny", "open"} {
		if _, err := pods.Create(ctx, d.probePod(id, mode, host+" "+port), metav1.CreateOptions{}); err != nil {
			return false, target, d.fail("create a probe pod", err)
		}
	}
	codes := map[string]int32{}
	for len(codes) < 2 {
		for _, mode := range []string{"deny", "open"} {
			if _, done := codes[mode]; done {
				continue
			}
			p, err := pods.Get(ctx, id+"-"+mode, metav1.GetOptions{})
			if err != nil {
				return false, target, d.fail("read a probe pod", err)
			}
			cs := containerStatus(p)
			switch {
			case cs != nil && cs.State.Terminated != nil:
				codes[mode] = cs.State.Terminated.ExitCode
			case cs != nil && cs.State.Waiting != nil && probeFailures[cs.State.Waiting.Reason]:
				return false, target, fmt.Errorf("probe pod %s: %s: %s (image %s)", p.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message, d.probeImage)
			}
		}
		if len(codes) < 2 {
			if err := d.sleep(ctx); err != nil {
				return false, target, fmt.Errorf("wait for the probe pods: %w", err)
			}
		}
	}
	switch {
	case codes["open"] != 0:
		return false, target, fmt.Errorf("a Pod under no policy could not reach %s either (exit %d; %d connections): the cluster's network, not its policy, blocks it", target, codes["open"], dialled.Load())
	case codes["deny"] == 0:
		return false, target, nil
	case codes["deny"] == 7:
		return true, target, nil
	case codes["deny"] == 3:
		return false, target, fmt.Errorf("the probe pod under the deny-all policy was neither blocked for its last four dials nor connected at its last: the cluster's network is unsteady")
	}
	return false, target, fmt.Errorf("the probe pod under the deny-all policy exited %d", codes["deny"])
}

// probeFailures are the waiting reasons that end a probe at once: the
// image is not there. Others (CreateContainerError: a busy node's copy of
// the image timed out) the kubelet retries, within probeTimeout.
var probeFailures = map[string]bool{"ErrImageNeverPull": true, "InvalidImageName": true, "ErrImagePull": true, "ImagePullBackOff": true}

// The probe's labels: its id on its Pods and policy, and the Pod's mode.
const (
	labelProbe     = annPrefix + "netprobe"
	labelProbeMode = annPrefix + "netprobe-mode"
)

// probePod is one of the probe's Pods: hardened as a sandbox's, no
// sandbox labels (no sandbox policy selects it).
func (d *Driver) probePod(id, mode, target string) *corev1.Pod {
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: id + "-" + mode, Labels: map[string]string{labelProbe: id, labelProbeMode: mode}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr(int64(uid)), RunAsGroup: ptr(int64(gid)), RunAsNonRoot: ptr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: container, Image: d.probeImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"bash", "-c", probeScript},
				Env:       []corev1.EnvVar{{Name: "TARGET", Value: target}, {Name: "MODE", Value: mode}},
				Resources: corev1.ResourceRequirements{Limits: small, Requests: small},
				SecurityContext: &corev1.SecurityContext{
					Privileged: ptr(false), AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	d.place(&p.Spec) // probed where the sandboxes run
	return p
}

// nodeAddr is the InternalIP (IPv4) of the first Ready node the driver's
// Pods may run on.
func (d *Driver) nodeAddr(ctx context.Context) (netip.Addr, error) {
	nodes, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return netip.Addr{}, d.fail("list nodes", err)
	}
	for _, n := range nodes.Items {
		if !d.eligible(&n) {
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		for _, a := range n.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if ready && a.Type == corev1.NodeInternalIP && err == nil && ip.Is4() {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, errors.New("no Ready node with an IPv4 InternalIP among " + d.placementNote())
}

// PolicyGuard is the hub's egress guard for the Kubernetes driver
// (sandboxes.EgressGuard): Err refuses network public while the last probe
// did not find NetworkPolicy enforced; Tick probes again when the last
// result is older than the interval (in the background: a probe takes
// seconds, the reaper's tick must not).
type PolicyGuard struct {
	d       *Driver
	every   time.Duration
	running atomic.Bool
}

// NewPolicyGuard returns a guard that probes d every interval (default
// 5 minutes).
func NewPolicyGuard(d *Driver, every time.Duration) *PolicyGuard {
	if every <= 0 {
		every = 5 * time.Minute
	}
	return &PolicyGuard{d: d, every: every}
}

// Tick starts a probe when the last is older than the interval and none
// runs.
func (g *PolicyGuard) Tick(ctx context.Context) {
	if p, ok := g.d.LastPolicyProbe(); ok && time.Since(p.At) < g.every {
		return
	}
	if !g.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer g.running.Store(false)
		_, _ = g.d.ProbePolicy(context.WithoutCancel(ctx))
	}()
}

// Err is nil while NetworkPolicy is enforced; else why network public is
// refused (errors.Is ErrNotEnforced).
func (g *PolicyGuard) Err() error {
	p, ok := g.d.LastPolicyProbe()
	if !ok {
		return fmt.Errorf("network public is refused until the hub has probed whether the cluster enforces NetworkPolicy: %w", ErrNotEnforced)
	}
	return p.Refusal()
}
