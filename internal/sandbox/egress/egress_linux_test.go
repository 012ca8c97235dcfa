//go:build linux

package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// uncoveredHostNets lists the host's IPv4 on-link networks (each address
// with its interface's mask) that none of blocked or a wider one of them
// holds, widest first, computed here independently of the package.
func uncoveredHostNets(t *testing.T, blocked []string) []string {
	t.Helper()
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var nets []netip.Prefix
	for _, a := range ifaddrs {
		ipn := a.(*net.IPNet)
		ip4 := ipn.IP.To4()
		if ip4 == nil {
			continue
		}
		ones, _ := ipn.Mask.Size()
		if ones > 32 {
			ones -= 96
		}
		nets = append(nets, netip.PrefixFrom(netip.AddrFrom4([4]byte(ip4)), ones).Masked())
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int {
		if a.Bits() != b.Bits() {
			return a.Bits() - b.Bits()
		}
		return a.Addr().Compare(b.Addr())
	})
	var s []string
outer:
	for _, p := range nets {
		for _, b := range blocked {
			q := netip.MustParsePrefix(b)
			if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
				continue outer
			}
		}
		blocked = append(blocked, p.String())
		if p.IsSingleIP() {
			s = append(s, p.Addr().String())
		} else {
			s = append(s, p.String())
		}
	}
	return s
}

func TestEnsureIdempotent(t *testing.T) {
	cli := requireEnv(t)
	opts := Options{
		NetworkName:  "agentd-egress-test-rules",
		BridgeName:   "agentd-etr0",
		Subnet:       netip.MustParsePrefix("172.30.250.0/24"),
		ExtraBlocked: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		AllowDNS:     []netip.Addr{netip.MustParseAddr("10.250.77.53")},
		Logger:       zaptest.NewLogger(t),
	}
	clean(t, cli, opts)
	t.Cleanup(func() { clean(t, cli, opts) })

	first, err := Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("first Ensure: %v", err)
	}
	second, err := Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if first.ID != second.ID {
		t.Errorf("second Ensure made another network: %s, then %s", first.ID, second.ID)
	}

	// Exactly one copy of each rule, as nft lists them.
	blocked := []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
		"100.64.0.0/10", "127.0.0.0/8", "0.0.0.0/8", "192.0.0.0/24", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
		"203.0.113.0/24"}
	var want strings.Builder
	want.WriteString(`table inet agentd_agentd-etr0 {
	chain prerouting {
		type filter hook prerouting priority mangle; policy accept;
		iifname "agentd-etr0" jump egress
	}

	chain egress {
		meta nfproto ipv6 drop
		ct state established,related accept
		ip daddr 10.250.77.53 udp dport 53 accept
		ip daddr 10.250.77.53 tcp dport 53 accept
`)
	for _, b := range blocked {
		fmt.Fprintf(&want, "\t\tip daddr %s drop\n", b)
	}
	for _, a := range uncoveredHostNets(t, slices.Clone(blocked)) {
		fmt.Fprintf(&want, "\t\tip daddr %s drop\n", a)
	}
	want.WriteString("\t\tfib daddr type local drop\n\t}\n}\n")
	got := run(t, "nft", "list", "table", "inet", "agentd_agentd-etr0")
	if diff := cmp.Diff(got, want.String()); diff != "" {
		t.Errorf("rules after Ensure twice (-got +want):\n%s", diff)
	}
	if err := second.Check(t.Context()); err != nil {
		t.Errorf("Check: %v", err)
	}

	// The network, as the engine reports it.
	res, err := cli.NetworkInspect(t.Context(), opts.NetworkName, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nw := res.Network
	type settings struct {
		Driver, Bridge, ICC, Subnet string
		Internal, IPv6              bool
	}
	gotS := settings{nw.Driver, nw.Options[optBridgeName], nw.Options[optICC], "", nw.Internal, nw.EnableIPv6}
	if len(nw.IPAM.Config) == 1 {
		gotS.Subnet = nw.IPAM.Config[0].Subnet.String()
	}
	wantS := settings{"bridge", "agentd-etr0", "false", "172.30.250.0/24", false, false}
	if diff := cmp.Diff(gotS, wantS); diff != "" {
		t.Errorf("network settings (-got +want):\n%s", diff)
	}
	if second.Gateway != netip.MustParseAddr("172.30.250.1") {
		t.Errorf("gateway = %s, want 172.30.250.1", second.Gateway)
	}

	// A network of that name with other settings is refused, not changed.
	other := opts
	other.Subnet = netip.MustParsePrefix("172.30.249.0/24")
	if _, err := Ensure(t.Context(), other); !errors.Is(err, ErrNetworkConflict) || !strings.Contains(err.Error(), "subnets [172.30.250.0/24]") {
		t.Errorf("Ensure with another subnet: %v, want ErrNetworkConflict naming the subnets", err)
	}

	// Remove takes the table away, twice without error, and Check says so.
	for range 2 {
		if err := second.Remove(t.Context()); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if err := second.Check(t.Context()); !errors.Is(err, ErrRulesAltered) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Check after Remove: %v, want ErrRulesAltered (table does not exist)", err)
	}
	if err := second.RemoveNetwork(t.Context()); err != nil {
		t.Errorf("RemoveNetwork: %v", err)
	}
	if _, err := cli.NetworkInspect(t.Context(), opts.NetworkName, client.NetworkInspectOptions{}); !isNotFound(err) {
		t.Errorf("network still there after RemoveNetwork: %v", err)
	}
}

// TestSandboxEgress proves the rules from inside a real container: the same
// listener in the test's own namespace is reached over a public-range
// address and not over a private one, the host's addresses (the gateway, and
// one added after Ensure) are not reached, and without the rules all of them
// are (so the blocks are the rules' doing, not a broken setup); a rule
// deleted by hand is a real hole that Check names and Ensure closes.
func TestSandboxEgress(t *testing.T) {
	cli := requireEnv(t)
	buildImage(t, cli)
	opts := Options{
		NetworkName: "agentd-egress-test-ct",
		BridgeName:  "agentd-etc0",
		Subnet:      netip.MustParsePrefix("172.30.251.0/24"),
		Logger:      zaptest.NewLogger(t),
	}
	clean(t, cli, opts)
	t.Cleanup(func() { clean(t, cli, opts) })
	newNetns(t)
	ns := serve(t, listenInNetns(t))
	private := netip.AddrPortFrom(nsPrivate.Addr(), ns.port)
	lan := netip.AddrPortFrom(nsLAN.Addr(), ns.port)
	public := netip.AddrPortFrom(nsPublic.Addr(), ns.port)
	hostReaches(t, private, ns)
	hostReaches(t, lan, ns)
	hostReaches(t, public, ns)

	n, err := Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	gln, err := net.Listen("tcp4", netip.AddrPortFrom(n.Gateway, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	gw := serve(t, gln)
	gateway := netip.AddrPortFrom(n.Gateway, gw.port)

	reached := func(what string, to netip.AddrPort, s *tokenServer) {
		t.Helper()
		out, code := probe(t, cli, opts.NetworkName, to)
		if code != 0 || !strings.Contains(out, s.token) {
			t.Errorf("%s: %s not reached from the container (exit %d): %q", what, to, code, out)
		}
	}
	blocked := func(what string, to netip.AddrPort, s *tokenServer) {
		t.Helper()
		before := s.accepted.Load()
		out, code := probe(t, cli, opts.NetworkName, to)
		if code == 0 || strings.Contains(out, s.token) || s.accepted.Load() != before {
			t.Errorf("%s: %s reached from the container (exit %d, accepted %d): %q", what, to, code, s.accepted.Load()-before, out)
		}
	}

	// An address the host gains after Ensure has no rule of its own; the
	// fib rule (daddr is local) blocks it.
	run(t, "ip", "addr", "add", hostLate.String(), "dev", vethH)
	if slices.Contains(n.rules.chains[chainEgress], "ip daddr "+hostLate.Addr().String()+" drop") {
		t.Fatalf("%s was on the host before Ensure", hostLate.Addr())
	}
	lln, err := net.Listen("tcp4", netip.AddrPortFrom(hostLate.Addr(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	late := serve(t, lln)
	lateHost := netip.AddrPortFrom(hostLate.Addr(), late.port)

	// Read back: the host's LAN is dropped as a network, not only the
	// host's address on it.
	if listing := run(t, "nft", "list", "chain", "inet", tableName(opts.BridgeName), chainEgress); !strings.Contains(listing, "ip daddr "+hostLAN.Masked().String()+" drop") {
		t.Errorf("no drop of the host's on-link network %s:\n%s", hostLAN.Masked(), listing)
	}
	reached("with rules, public-range address of the namespace (routed via the LAN)", public, ns)
	blocked("with rules, private address of the namespace", private, ns)
	blocked("with rules, a neighbour on the host's non-RFC 1918 LAN", lan, ns)
	blocked("with rules, the gateway (a host address)", gateway, gw)
	blocked("with rules, a public-range host address added after Ensure", lateHost, late)
	// The same from a gVisor sandbox on the network (runsc-net: the
	// sentry's sockets in the container's namespace), when registered.
	t.Run("gvisor", func(t *testing.T) {
		sandboxtest.RequireIsolation(t, sandbox.IsolationGVisor)
		rt := sandbox.RuntimeFor(sandbox.IsolationGVisor, opts.NetworkName)
		check := func(what string, to netip.AddrPort, s *tokenServer, want bool) {
			t.Helper()
			before := s.accepted.Load()
			out, code := probeOn(t, cli, opts.NetworkName, rt, to)
			full := code == 0 && strings.Contains(out, s.token) && s.accepted.Load() != before
			partly := code == 0 || strings.Contains(out, s.token) || s.accepted.Load() != before
			if want && !full || !want && partly {
				t.Errorf("gVisor (%s), %s: %s reached (exit %d, accepted %d): %q; want reached %v", rt, what, to, code, s.accepted.Load()-before, out, want)
			}
		}
		check("public-range address of the namespace", public, ns, true)
		check("private address of the namespace", private, ns, false)
		check("a neighbour on the host's LAN", lan, ns, false)
		check("the gateway", gateway, gw, false)
		check("a host address added after Ensure", lateHost, late, false)
	})

	if err := n.Remove(t.Context()); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	reached("control without rules, private address", private, ns)
	reached("control without rules, LAN neighbour", lan, ns)
	reached("control without rules, gateway", gateway, gw)
	reached("control without rules, host address added after Ensure", lateHost, late)

	if n, err = Ensure(t.Context(), opts); err != nil {
		t.Fatalf("Ensure again: %v", err)
	}
	blocked("rules back, private address", private, ns)

	// Someone deletes a rule by hand: Check names it, and the hole is real.
	deleteRule(t, tableName(opts.BridgeName), "ip daddr 10.0.0.0/8 drop")
	err = n.Check(t.Context())
	if !errors.Is(err, ErrRulesAltered) || !strings.Contains(err.Error(), `missing "ip daddr 10.0.0.0/8 drop"`) || !strings.Contains(err.Error(), "CAP_NET_ADMIN") {
		t.Errorf("Check after a rule was deleted: %v, want ErrRulesAltered naming the rule and the fix", err)
	}
	t.Logf("Check after a rule was deleted: %v", err)
	reached("rule deleted, private address", private, ns)
	if n, err = Ensure(t.Context(), opts); err != nil {
		t.Fatalf("Ensure after tampering: %v", err)
	}
	if err := n.Check(t.Context()); err != nil {
		t.Errorf("Check after Ensure: %v", err)
	}
	blocked("rules restored, private address", private, ns)

	// The table is flushed behind the hub's back: the hole is real until
	// the guard's next tick notices, refuses, and re-installs.
	core, logs := observer.New(zap.InfoLevel)
	g := NewGuard(n, zap.New(core))
	g.Tick(t.Context())
	if err := g.Err(); err != nil || logs.Len() != 0 {
		t.Fatalf("tick with the rules in place: Err %v, logged %v", err, logs.All())
	}
	run(t, "nft", "flush", "table", "inet", tableName(opts.BridgeName))
	reached("table flushed, private address", private, ns)
	g.Tick(t.Context())
	if err := g.Err(); err != nil {
		t.Errorf("after re-install: Err %v", err)
	}
	if got := logs.FilterMessageSnippet("SANDBOX EGRESS RULES MISSING").FilterField(zap.String("network", opts.NetworkName)).Len(); got != 1 {
		t.Errorf("the tick after the flush logged %v, want one error naming the network", logs.All())
	}
	if err := n.Check(t.Context()); err != nil {
		t.Errorf("Check after the guard's re-install: %v", err)
	}
	blocked("flushed, then re-installed by the guard's tick, private address", private, ns)
	blocked("flushed, then re-installed by the guard's tick, LAN neighbour", lan, ns)

	// When the re-install fails too, calls stay refused and say why; the
	// next tick that can re-install serves them again.
	failing := filepath.Join(t.TempDir(), "nft")
	script := "#!/bin/sh\ncase \"$1\" in -f) echo 'Error: Operation not permitted' >&2; exit 1;; esac\nexec nft \"$@\"\n"
	if err := os.WriteFile(failing, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	real := n.nft
	n.nft = nft{path: failing}
	run(t, "nft", "delete", "table", "inet", tableName(opts.BridgeName))
	g.Tick(t.Context())
	err = g.Err()
	want := "the hub's egress rules for sandbox network " + opts.NetworkName + " are missing or altered (table inet " + tableName(opts.BridgeName) + " flushed?)"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "refused until they are restored") || !errors.Is(err, ErrPermission) {
		t.Errorf("re-install not permitted: Err = %v, want it to say %q and wrap ErrPermission", err, want)
	}
	n.nft = real
	g.Tick(t.Context())
	if err := g.Err(); err != nil {
		t.Errorf("the tick after nft works again: Err %v", err)
	}
	blocked("restored on a later tick, private address", private, ns)
}

// deleteRule deletes one rule of the egress chain by its handle, as an
// operator would by hand.
func deleteRule(t *testing.T, table, rule string) {
	t.Helper()
	out := run(t, "nft", "-a", "list", "chain", "inet", table, chainEgress)
	m := regexp.MustCompile(regexp.QuoteMeta(rule) + ` # handle (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rule %q not in:\n%s", rule, out)
	}
	run(t, "nft", "delete", "rule", "inet", table, chainEgress, "handle", m[1])
}

// TestTwoNetworks: two hubs with two networks on one engine get two bridges
// and two tables, and neither replaces the other's rules (before, both used
// agentd-sb0 and one table). A network made earlier with another bridge
// keeps it, and its rules follow it.
func TestTwoNetworks(t *testing.T) {
	cli := requireEnv(t)
	a := Options{NetworkName: "agentd-egress-test-a", Subnet: netip.MustParsePrefix("172.30.252.0/24"), Logger: zaptest.NewLogger(t)}
	b := Options{NetworkName: "agentd-egress-test-b", Subnet: netip.MustParsePrefix("172.30.253.0/24"), Logger: zaptest.NewLogger(t)}
	old := Options{NetworkName: "agentd-egress-test-old", BridgeName: "agentd-eto0", Subnet: netip.MustParsePrefix("172.30.254.0/24"), Logger: zaptest.NewLogger(t)}
	for _, o := range []Options{a, b, old} {
		if o.BridgeName == "" {
			o.BridgeName = BridgeFor(o.NetworkName)
		}
		clean(t, cli, o)
		t.Cleanup(func() { clean(t, cli, o) })
	}
	na, err := Ensure(t.Context(), a)
	if err != nil {
		t.Fatalf("Ensure a: %v", err)
	}
	nb, err := Ensure(t.Context(), b)
	if err != nil {
		t.Fatalf("Ensure b: %v", err)
	}
	if na.Bridge == nb.Bridge || na.Bridge != BridgeFor(a.NetworkName) || nb.Bridge != BridgeFor(b.NetworkName) {
		t.Errorf("bridges %q and %q, want BridgeFor of each name, different", na.Bridge, nb.Bridge)
	}
	for _, n := range []*Network{na, nb} {
		if err := n.Check(t.Context()); err != nil {
			t.Errorf("%s after both Ensures: %v", n.Name, err)
		}
		res, err := cli.NetworkInspect(t.Context(), n.Name, client.NetworkInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Network.Options[optBridgeName]; got != n.Bridge {
			t.Errorf("network %s has bridge %q, want %q", n.Name, got, n.Bridge)
		}
		listing := run(t, "nft", "list", "chain", "inet", tableName(n.Bridge), chainHook)
		if !strings.Contains(listing, fmt.Sprintf("iifname %q jump egress", n.Bridge)) {
			t.Errorf("table of %s does not match its bridge:\n%s", n.Name, listing)
		}
	}
	// Removing one hub's rules leaves the other's.
	if err := na.Remove(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := nb.Check(t.Context()); err != nil {
		t.Errorf("b after a's rules were removed: %v", err)
	}

	// A network that exists with the bridge it was made with keeps it.
	if _, err := Ensure(t.Context(), old); err != nil {
		t.Fatalf("Ensure old: %v", err)
	}
	old.BridgeName = ""
	n, err := Ensure(t.Context(), old)
	if err != nil {
		t.Fatalf("Ensure old without a bridge name: %v", err)
	}
	if n.Bridge != "agentd-eto0" {
		t.Errorf("existing network's bridge = %q, want agentd-eto0 (kept)", n.Bridge)
	}
	if err := n.Check(t.Context()); err != nil {
		t.Errorf("old: %v", err)
	}
}
