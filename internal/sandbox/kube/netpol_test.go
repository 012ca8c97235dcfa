package kube

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// listener is a TCP listener the test runs on the node's address (the
// bridge the Pods reach), recording who connected.
type listener struct {
	net.Listener
	mu   sync.Mutex
	from []netip.Addr
}

func listen(t *testing.T, d *Driver) *listener {
	t.Helper()
	ip, err := d.nodeAddr(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatalf("listen on the node's address: %v", err)
	}
	l := &listener{Listener: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			l.mu.Lock()
			l.from = append(l.from, ap.Addr())
			l.mu.Unlock()
			c.Close()
		}
	}()
	return l
}

// seen says how many connections came from ip.
func (l *listener) seen(ip string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.from {
		if a.String() == ip {
			n++
		}
	}
	return n
}

// dial runs a TCP connect to addr in pod (kubectl exec; 2 s bound) and
// says whether it connected.
func dial(t *testing.T, d *Driver, pod, addr string) bool {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.CommandContext(t.Context(), "kubectl", "--kubeconfig", kubeconfig(), "-n", d.ns, "exec", pod, "--",
		"bash", "-c", `timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$0" "$1" 2>/dev/null && echo reached || echo blocked`, host, port).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl exec %s: %v: %s", pod, err, out)
	}
	return strings.TrimSpace(string(out)) == "reached"
}

func kubeconfig() string {
	if c := os.Getenv("AGENTD_KUBECONFIG"); c != "" {
		return c
	}
	return os.Getenv("KUBECONFIG")
}

// enforced probes the cluster and skips the test when it does not enforce
// NetworkPolicy.
func enforced(t *testing.T, d *Driver) PolicyProbe {
	t.Helper()
	p, err := d.ProbePolicy(t.Context())
	t.Logf("probe: enforced %v, target %s, took %v, err %v", p.Enforced, p.Target, p.Took, err)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if !p.Enforced {
		t.Skip("the cluster does not enforce NetworkPolicy: make k8s-up starts kube-router's firewall (scripts/k8s-netpol.sh start) unless K8S_NETPOL=0")
	}
	return p
}

// On a cluster that enforces NetworkPolicy: a sandbox of network none and
// one of network public both cannot reach a listener on the node's address
// (a private address: public excludes it), while a Pod under no policy
// does; the policies read back from the API are the deny-all one and the
// public egress one without the private ranges.
func TestNetworkPolicyEnforced(t *testing.T) {
	d := cluster(t)
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH (the export line make k8s-up prints)")
	}
	ctx := t.Context()
	img := testImage(t, d)
	d.probeImage = img
	enforced(t, d)
	ln := listen(t, d)
	addr := ln.Addr().String()

	// A Pod under no policy reaches the listener: what blocks the
	// sandboxes is their policy.
	ctl := d.probePod("agentd-nt-control", "open", "")
	ctl.Spec.Containers[0].Command = []string{"sleep", "300"}
	if _, err := d.cs.CoreV1().Pods(d.ns).Create(ctx, ctl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	errc := make(chan error, 2)
	for _, network := range []string{NetworkNone, NetworkPublic} {
		s := testSpec(t, d, "agentd-kt-net-"+network, nil)
		s.Network = network
		id := create(t, d, s)
		ids[network] = id
		go func() { errc <- d.Start(ctx, id) }() // together: a Pod takes a minute to start on a busy node
	}
	for range ids {
		if err := <-errc; err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	ctlIP := podIP(t, d, ctl.Name)
	reached := false
	for end := time.Now().Add(20 * time.Second); !reached && time.Now().Before(end); {
		reached = dial(t, d, ctl.Name, addr)
	}
	if !reached || ln.seen(ctlIP) == 0 {
		t.Fatalf("a Pod under no policy could not reach %s (seen %d): the test cannot tell policy from network", addr, ln.seen(ctlIP))
	}

	for network, id := range ids {
		ip := podIP(t, d, id)
		// The policy controller programs a new Pod's rules a moment
		// after it starts: blocked within 20 s, then blocked every time.
		blocked := false
		for end := time.Now().Add(20 * time.Second); !blocked && time.Now().Before(end); {
			blocked = !dial(t, d, id, addr)
		}
		if !blocked {
			t.Errorf("network %s: the sandbox still reaches %s after 20 s", network, addr)
			continue
		}
		before := ln.seen(ip)
		for i := range 3 {
			if dial(t, d, id, addr) {
				t.Errorf("network %s: dial %d after the first block reached %s", network, i, addr)
			}
		}
		if n := ln.seen(ip); n != before {
			t.Errorf("network %s: the listener saw %d more connections from %s", network, n-before, ip)
		}
		p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, id, metav1.GetOptions{})
		if err != nil || p.Labels[labelNetwork] != network {
			t.Errorf("network %s: the Pod's %s label: %v, %v", network, labelNetwork, p.Labels, err)
		}
	}

	none, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Get(ctx, policyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(none.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) ||
		len(none.Spec.Egress) != 0 || len(none.Spec.Ingress) != 0 || none.Spec.PodSelector.MatchLabels[sandbox.LabelManaged] != "1" {
		t.Errorf("policy %s: %+v; want every sandbox, no ingress, no egress", policyName, none.Spec)
	}
	pub, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Get(ctx, publicPolicyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pub.Spec.PodSelector.MatchLabels[labelNetwork] != NetworkPublic ||
		!slices.Equal(pub.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) ||
		len(pub.Spec.Egress) != 1 || len(pub.Spec.Egress[0].To) != 1 || pub.Spec.Egress[0].To[0].IPBlock == nil {
		t.Fatalf("policy %s: %+v; want one ipBlock egress rule for the public sandboxes", publicPolicyName, pub.Spec)
	}
	b := pub.Spec.Egress[0].To[0].IPBlock
	for _, want := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"} {
		if !slices.Contains(b.Except, want) {
			t.Errorf("policy %s: except %v lacks %s", publicPolicyName, b.Except, want)
		}
	}
	if b.CIDR != "0.0.0.0/0" {
		t.Errorf("policy %s: cidr %s, want 0.0.0.0/0 (IPv4 only)", publicPolicyName, b.CIDR)
	}
}

// podIP waits for the Pod's IP.
func podIP(t *testing.T, d *Driver, name string) string {
	t.Helper()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		p, err := d.cs.CoreV1().Pods(d.ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return p.Status.PodIP
		}
	}
	t.Fatalf("pod %s has no IP after a minute", name)
	return ""
}

// The probe says enforced with the enforcer running, and Create accepts
// network public then. With AGENTD_KUBE_NETPOL_OFF_TEST=1 it also stops the
// shared cluster's enforcer (scripts/k8s-netpol.sh stop), checks that the
// probe says not enforced, that Create refuses public naming the cause
// while none still runs, and starts the enforcer again.
func TestPolicyProbe(t *testing.T) {
	d := cluster(t)
	ctx := t.Context()
	d.probeImage = testImage(t, d)
	enforced(t, d)
	if p, ok := d.LastPolicyProbe(); !ok || p.Refusal() != nil || time.Since(p.At) > time.Minute {
		t.Errorf("LastPolicyProbe: %+v %v; want the enforced result just made", p, ok)
	}
	pub := testSpec(t, d, "agentd-kt-probe-pub", nil)
	pub.Network = NetworkPublic
	create(t, d, pub)
	if os.Getenv("AGENTD_KUBE_NETPOL_OFF_TEST") != "1" {
		t.Log("the not-enforced half stops the shared cluster's enforcer: run it with AGENTD_KUBE_NETPOL_OFF_TEST=1")
		return
	}
	netpol(t, "stop")
	t.Cleanup(func() { netpol(t, "start") })
	p, err := d.ProbePolicy(ctx)
	t.Logf("probe without the enforcer: enforced %v, took %v, err %v", p.Enforced, p.Took, err)
	if err != nil || p.Enforced || !errors.Is(p.Refusal(), ErrNotEnforced) ||
		!strings.Contains(p.Refusal().Error(), "does not enforce NetworkPolicy") {
		t.Fatalf("probe without the enforcer: %+v, %v; want not enforced", p, err)
	}
	pub2 := testSpec(t, d, "agentd-kt-probe-pub2", nil)
	pub2.Network = NetworkPublic
	if id, err := d.Create(ctx, pub2); !errors.Is(err, ErrNotEnforced) {
		t.Errorf("Create public without the enforcer: %q, %v; want ErrNotEnforced", id, err)
		_ = d.Remove(ctx, id)
	}
	if err := d.Start(ctx, pub.Name); !errors.Is(err, ErrNotEnforced) {
		t.Errorf("Start of a public sandbox without the enforcer: %v; want ErrNotEnforced", err)
	}
	// none still runs: TestKubePublicRefusedWithoutPolicy (internal/hub)
	// runs the builtin environment's sandbox then.
	create(t, d, testSpec(t, d, "agentd-kt-probe-none", nil))
}

// netpol runs scripts/k8s-netpol.sh with the cluster's state dir (the
// kubeconfig's directory).
func netpol(t *testing.T, op string) {
	t.Helper()
	state := filepath.Dir(kubeconfig())
	cmd := exec.Command("bash", "../../../scripts/k8s-netpol.sh", op)
	cmd.Env = append(os.Environ(), "K8S_STATE="+state, "K8S_CACHE="+filepath.Dir(state))
	out, err := cmd.CombinedOutput()
	t.Logf("%s k8s-netpol.sh %s: %s", time.Now().UTC().Format(time.RFC3339), op, out)
	if err != nil {
		t.Fatalf("k8s-netpol.sh %s: %v", op, err)
	}
}

// The public policy excludes netblock's ranges and the cluster's own
// addresses outside them, IPv4 only; DNS only when the cluster has it.
func TestPublicPolicy(t *testing.T) {
	np := publicPolicy([]netip.Prefix{
		netip.MustParsePrefix("10.213.0.1/32"),  // in 10/8 already
		netip.MustParsePrefix("203.0.113.7/32"), // a public node address
		netip.MustParsePrefix("2001:db8::1/128"),
	}, nil)
	ex := np.Spec.Egress[0].To[0].IPBlock.Except
	if !slices.Contains(ex, "203.0.113.7/32") || slices.Contains(ex, "10.213.0.1/32") || slices.ContainsFunc(ex, func(s string) bool { return strings.Contains(s, ":") }) {
		t.Errorf("except %v: want 203.0.113.7/32, not the covered 10.213.0.1/32, no IPv6", ex)
	}
	if len(np.Spec.Egress) != 1 {
		t.Errorf("egress rules %d, want 1 without cluster DNS", len(np.Spec.Egress))
	}
	dns := publicPolicy(nil, &networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})
	if len(dns.Spec.Egress) != 2 || len(dns.Spec.Egress[1].Ports) != 2 || dns.Spec.Egress[1].Ports[0].Port.IntValue() != 53 {
		t.Errorf("with cluster DNS: %+v; want a port 53 rule", dns.Spec.Egress)
	}
	if err := validNetwork("agentd-sandboxes"); err == nil {
		t.Error("validNetwork accepts a Docker network name")
	}
}
