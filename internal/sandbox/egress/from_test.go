package egress

import (
	"net/netip"
	"strings"
	"testing"
)

// TestAllowFromRefuses: bad input changes nothing.
func TestAllowFromRefuses(t *testing.T) {
	t.Parallel()
	n := &Network{Subnet: netip.MustParsePrefix("172.30.247.0/24")}
	in := netip.MustParseAddr("172.30.247.10")
	for name, c := range map[string]struct {
		src  netip.Addr
		dest string
	}{
		"source outside the subnet": {netip.MustParseAddr("10.0.0.1"), "10.1.0.0/16"},
		"loopback":                  {in, "127.0.0.1/32"},
		"wider than /8":             {in, "0.0.0.0/0"},
		"the sandbox network":       {in, "172.30.247.0/28"},
		"IPv6":                      {in, "fd00::/64"},
	} {
		if err := n.AllowFrom(t.Context(), c.src, []netip.Prefix{netip.MustParsePrefix(c.dest)}); err == nil {
			t.Errorf("%s: AllowFrom(%s, %s) succeeded", name, c.src, c.dest)
		}
	}
	if len(n.Sources()) != 0 {
		t.Errorf("refused input left sources %v", n.Sources())
	}
}

// TestBuildRulesAllowFrom: each source's accepts come after the hub-wide
// ones and the drop of the host's own addresses, sorted by source, and
// before every private-range drop.
func TestBuildRulesAllowFrom(t *testing.T) {
	t.Parallel()
	rs := buildRules(ruleInput{bridge: "b", subnet: netip.MustParsePrefix("172.30.240.0/24"),
		allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")},
		from: map[netip.Addr][]netip.Prefix{
			netip.MustParseAddr("172.30.240.9"): {netip.MustParsePrefix("192.168.1.5/32")},
			netip.MustParseAddr("172.30.240.3"): {netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("192.168.7.1/32")},
		}})
	got := strings.Join(rs.chains[chainEgress][:8], "\n")
	want := "meta nfproto ipv6 drop\nct state established,related accept\nfib daddr type local drop\nip daddr 10.20.0.0/16 accept\n" +
		"ip saddr 172.30.240.3 ip daddr 10.9.0.0/16 accept\nip saddr 172.30.240.3 ip daddr 192.168.7.1 accept\n" +
		"ip saddr 172.30.240.9 ip daddr 192.168.1.5 accept\nip daddr 10.0.0.0/8 drop"
	if got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
	// Per-source accepts alone still get the host drop first.
	rs = buildRules(ruleInput{bridge: "b", subnet: netip.MustParsePrefix("172.30.240.0/24"),
		from: map[netip.Addr][]netip.Prefix{netip.MustParseAddr("172.30.240.9"): {netip.MustParsePrefix("192.168.1.5/32")}}})
	if got := strings.Join(rs.chains[chainEgress][2:4], "\n"); got != "fib daddr type local drop\nip saddr 172.30.240.9 ip daddr 192.168.1.5 accept" {
		t.Errorf("per-source only: %s", got)
	}
}
