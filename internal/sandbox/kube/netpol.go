package kube

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devdepot-ai/agentd/internal/netblock"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// The networks the driver runs: Spec.Network is one of them.
const (
	// NetworkNone: no traffic in or out (agentd's tunnel is the hub's
	// unix socket).
	NetworkNone = "none"
	// NetworkPublic: egress to public addresses only, as on Docker
	// (internal/sandbox/egress): no private ranges, not the node, the
	// cluster's Pods or Services, not link-local (the metadata address).
	// Only on a cluster whose CNI enforces NetworkPolicy (ProbePolicy).
	NetworkPublic = "public"
)

const (
	// policyName is the namespace's NetworkPolicy for every sandbox: no
	// traffic in or out. Policies add up, so a public sandbox's egress is
	// what publicPolicyName allows.
	policyName = "agentd-sandbox-none"
	// publicPolicyName allows the public sandboxes' egress.
	publicPolicyName = "agentd-sandbox-public"
	// labelNetwork is the sandbox's network on its Pod.
	labelNetwork = annPrefix + "network"
)

// ErrNotEnforced: the cluster's CNI does not enforce NetworkPolicy, so a
// public sandbox's egress policy would not hold.
var ErrNotEnforced = errors.New("the cluster's CNI does not enforce NetworkPolicy")

// policies are the NetworkPolicies a sandbox of network needs, in the
// driver's namespace: the deny-all one always, and for public the egress
// one. extra are more addresses public must not reach (the node's, the
// cluster's ranges: clusterRanges).
func policies(network string, extra []netip.Prefix) []*networkingv1.NetworkPolicy {
	out := []*networkingv1.NetworkPolicy{{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{sandbox.LabelManaged: "1"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}}
	if network == NetworkPublic {
		out = append(out, publicPolicy(extra, nil))
	}
	return out
}

// publicPolicy lets the public sandboxes' Pods reach every IPv4 address
// but netblock's (the ranges Docker's public network drops, which hold
// the node here) and extra; dns, when the cluster has one, adds its
// servers' port 53. No IPv6 (Docker's public network drops it all).
// Ingress stays the deny-all policy's.
func publicPolicy(extra []netip.Prefix, dns *networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	blocked := netblock.IPv4()
	except := make([]string, 0, len(blocked)+len(extra))
	for _, p := range blocked {
		except = append(except, p.String())
	}
	for _, p := range extra {
		if p.Addr().Is4() && !covered(blocked, p) {
			except = append(except, p.Masked().String())
		}
	}
	slices.Sort(except)
	except = slices.Compact(except)
	rules := []networkingv1.NetworkPolicyEgressRule{{
		To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: except}}},
	}}
	if dns != nil {
		udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
		port := intstr.FromInt32(53)
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{*dns},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port}},
		})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: publicPolicyName},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{sandbox.LabelManaged: "1", labelNetwork: NetworkPublic}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      rules,
		},
	}
}

// covered says whether one of list holds all of p.
func covered(list []netip.Prefix, p netip.Prefix) bool {
	for _, b := range list {
		if b.Bits() <= p.Bits() && b.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// clusterRanges are the cluster's own addresses a public sandbox must
// not reach even where they are public: every node's addresses and Pod
// ranges, and the API server's Service address.
func (d *Driver) clusterRanges(ctx context.Context) ([]netip.Prefix, error) {
	nodes, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, d.fail("list nodes", err)
	}
	var out []netip.Prefix
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		} else if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			add(a.Address)
		}
		for _, c := range n.Spec.PodCIDRs {
			add(c)
		}
	}
	if svc, err := d.cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		add(svc.Spec.ClusterIP)
	}
	return out, nil
}

// clusterDNS is the peer of the cluster's DNS servers (kube-system's
// k8s-app=kube-dns Pods), or nil when it has no kube-dns Service (this
// machine's cluster has none: Pods get no resolver).
func (d *Driver) clusterDNS(ctx context.Context) (*networkingv1.NetworkPolicyPeer, error) {
	_, err := d.cs.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, d.fail("read service kube-system/kube-dns", err)
	}
	return &networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": metav1.NamespaceSystem}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
	}, nil
}

// applyNetwork labels the sandbox's Pod with its network and makes the
// policies that network needs: the deny-all one for every sandbox; for
// public, after checking that the cluster enforces policy (ProbePolicy's
// last result, or a new probe), the egress one, rewritten on every start
// (the cluster's addresses may have changed).
func (d *Driver) applyNetwork(ctx context.Context, p *corev1.Pod, network string) error {
	if network == "" {
		network = NetworkNone
	}
	p.Labels[labelNetwork] = network
	if err := d.ensurePolicy(ctx, policies(NetworkNone, nil)[0]); err != nil {
		return err
	}
	if network != NetworkPublic {
		return nil
	}
	if err := d.publicAllowed(ctx); err != nil {
		return err
	}
	extra, err := d.clusterRanges(ctx)
	if err != nil {
		return err
	}
	dns, err := d.clusterDNS(ctx)
	if err != nil {
		return err
	}
	np := publicPolicy(extra, dns)
	old, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Get(ctx, np.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return d.ensurePolicy(ctx, np)
	case err != nil:
		return d.fail("read network policy "+np.Name, err)
	}
	old.Spec = np.Spec
	if _, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		return d.fail("update network policy "+np.Name, err)
	}
	return nil
}

// ensurePolicy makes np in the namespace if it is missing.
func (d *Driver) ensurePolicy(ctx context.Context, np *networkingv1.NetworkPolicy) error {
	_, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return d.fail("create network policy "+np.Name, err)
	}
	return nil
}

// publicAllowed is nil when the last probe (or a new one, when there was
// none) found NetworkPolicy enforced; else why network public is refused.
func (d *Driver) publicAllowed(ctx context.Context) error {
	p, ok := d.LastPolicyProbe()
	if !ok {
		p, _ = d.ProbePolicy(ctx)
	}
	return p.Refusal()
}

// validNetwork is nil for the networks the driver runs.
func validNetwork(n string) error {
	if n == NetworkNone || n == NetworkPublic {
		return nil
	}
	return fmt.Errorf("network %q: the kubernetes driver runs sandboxes of network %q or %q", n, NetworkNone, NetworkPublic)
}
