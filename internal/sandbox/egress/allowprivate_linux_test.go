package egress

import (
	"net/netip"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestSandboxEgressAllowPrivate: with AllowPrivate naming one private
// address of the test's namespace, a container reaches it, and still not
// its neighbour in the same private network, the LAN neighbour, nor the
// gateway (the host's own address).
func TestSandboxEgressAllowPrivate(t *testing.T) {
	cli := requireEnv(t)
	buildImage(t, cli)
	allowed := netip.AddrPortFrom(nsPrivate.Addr(), 0)
	opts := Options{
		NetworkName:  "agentd-egress-test-ap",
		BridgeName:   "agentd-eap0",
		Subnet:       netip.MustParsePrefix("172.30.252.0/24"),
		AllowPrivate: []netip.Prefix{netip.PrefixFrom(allowed.Addr(), 32)},
		Logger:       zaptest.NewLogger(t),
	}
	clean(t, cli, opts)
	t.Cleanup(func() { clean(t, cli, opts) })
	newNetns(t)
	neighbour := netip.MustParseAddr("10.250.77.3")
	run(t, "ip", "-n", nsName, "addr", "add", neighbour.String()+"/24", "dev", vethN)
	ns := serve(t, listenInNetns(t))
	private := netip.AddrPortFrom(nsPrivate.Addr(), ns.port)
	other := netip.AddrPortFrom(neighbour, ns.port)
	lan := netip.AddrPortFrom(nsLAN.Addr(), ns.port)
	hostReaches(t, private, ns)
	hostReaches(t, other, ns)

	n, err := Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if err := n.Check(t.Context()); err != nil {
		t.Fatalf("Check after Ensure with AllowPrivate: %v", err)
	}
	gw := netip.AddrPortFrom(n.Gateway, ns.port) // nothing listens: refused or dropped either way
	if out, code := probe(t, cli, opts.NetworkName, private); code != 0 || !strings.Contains(out, ns.token) {
		t.Errorf("the allowed private address %s was not reached (exit %d): %q", private, code, out)
	}
	for what, to := range map[string]netip.AddrPort{"its private neighbour": other, "the LAN neighbour": lan, "the gateway": gw} {
		before := ns.accepted.Load()
		if out, code := probe(t, cli, opts.NetworkName, to); code == 0 || strings.Contains(out, ns.token) || ns.accepted.Load() != before {
			t.Errorf("%s %s was reached (exit %d): %q", what, to, code, out)
		}
	}
}

// TestBuildRulesAllowPrivate: the accepts come after the DNS ones and
// after a drop of the host's own addresses; without AllowPrivate the rules
// are as before.
func TestBuildRulesAllowPrivate(t *testing.T) {
	t.Parallel()
	rs := buildRules(ruleInput{bridge: "b", subnet: netip.MustParsePrefix("172.30.240.0/24"),
		allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("192.168.1.5/32")}})
	got := strings.Join(rs.chains[chainEgress][:6], "\n")
	want := "meta nfproto ipv6 drop\nct state established,related accept\nfib daddr type local drop\nip daddr 10.20.0.0/16 accept\nip daddr 192.168.1.5 accept\nip daddr 10.0.0.0/8 drop"
	if got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
}
