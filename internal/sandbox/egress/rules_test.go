package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestBuildRules(t *testing.T) {
	t.Parallel()
	rs := buildRules(ruleInput{
		bridge:   "agentd-sb0",
		subnet:   netip.MustParsePrefix("172.30.240.0/24"),
		extra:    []netip.Prefix{netip.MustParsePrefix("203.0.113.7/24"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
		allowDNS: addrs("10.255.255.53"),
		// 172.17.0.1/16 and 127.0.0.1/8 are covered; 192.0.2.2/32 is not
		// (twice: deduplicated); 198.51.100.9/24 is an on-link network
		// that is not RFC 1918 (a LAN), and holds 198.51.100.10/32; IPv6
		// is all dropped.
		host: prefixes("127.0.0.1/8", "192.0.2.2/32", "172.17.0.1/16", "::1/128", "fe80::1/64", "192.0.2.2/32",
			"198.51.100.10/32", "198.51.100.9/24"),
	})
	want := map[string][]string{
		"prerouting": {
			"type filter hook prerouting priority mangle; policy accept;",
			`iifname "agentd-sb0" jump egress`,
		},
		"egress": {
			"meta nfproto ipv6 drop",
			"ct state established,related accept",
			"ip daddr 10.255.255.53 udp dport 53 accept",
			"ip daddr 10.255.255.53 tcp dport 53 accept",
			"ip daddr 10.0.0.0/8 drop",
			"ip daddr 172.16.0.0/12 drop",
			"ip daddr 192.168.0.0/16 drop",
			"ip daddr 169.254.0.0/16 drop",
			"ip daddr 100.64.0.0/10 drop",
			"ip daddr 127.0.0.0/8 drop",
			"ip daddr 0.0.0.0/8 drop",
			"ip daddr 192.0.0.0/24 drop",
			"ip daddr 198.18.0.0/15 drop",
			"ip daddr 224.0.0.0/4 drop",
			"ip daddr 240.0.0.0/4 drop",
			"ip daddr 203.0.113.0/24 drop",
			"ip daddr 198.51.100.0/24 drop",
			"ip daddr 192.0.2.2 drop",
			"fib daddr type local drop",
		},
	}
	if diff := cmp.Diff(rs.chains, want); diff != "" {
		t.Errorf("chains (-got +want):\n%s", diff)
	}
	if rs.table != "agentd_agentd-sb0" {
		t.Errorf("table = %q", rs.table)
	}
}

func TestBuildRulesSubnetOutsideBlocked(t *testing.T) {
	t.Parallel()
	rs := buildRules(ruleInput{bridge: "b", subnet: netip.MustParsePrefix("198.51.100.0/24")})
	got := rs.chains[chainEgress]
	if got[len(got)-2] != "ip daddr 198.51.100.0/24 drop" {
		t.Errorf("a subnet no blocked range covers must be dropped; rules:\n%s", strings.Join(got, "\n"))
	}
}

func TestScript(t *testing.T) {
	t.Parallel()
	rs := buildRules(ruleInput{bridge: "br0", subnet: netip.MustParsePrefix("172.30.240.0/24")})
	s := rs.script()
	for _, want := range []string{
		"table inet agentd_br0\ndelete table inet agentd_br0\ntable inet agentd_br0 {\n",
		"\tchain prerouting {\n\t\ttype filter hook prerouting priority -150; policy accept;\n\t\tiifname \"br0\" jump egress\n\t}\n",
		"\tchain egress {\n\t\tmeta nfproto ipv6 drop\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
}

// listing is what nft 1.0.6 prints for a small ruleset.
const listing = `table inet agentd_br0 {
	chain prerouting {
		type filter hook prerouting priority mangle; policy accept;
		iifname "br0" jump egress
	}

	chain egress {
		ct state established,related accept
		ip daddr 10.0.0.0/8 drop
	}
}
`

func TestParseListing(t *testing.T) {
	t.Parallel()
	got, err := parseListing(listing)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"prerouting": {"type filter hook prerouting priority mangle; policy accept;", `iifname "br0" jump egress`},
		"egress":     {"ct state established,related accept", "ip daddr 10.0.0.0/8 drop"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("parseListing (-got +want):\n%s", diff)
	}
	// Older nft prints the priority as a number, and -a adds handles.
	old := strings.Replace(listing, "priority mangle;", "priority -150;", 1)
	old = strings.Replace(old, "10.0.0.0/8 drop", "10.0.0.0/8 drop # handle 7", 1)
	got, err = parseListing(old)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("parseListing, old format (-got +want):\n%s", diff)
	}
	if _, err := parseListing(""); err == nil {
		t.Error("parseListing of nothing: want an error")
	}
}

func TestProblems(t *testing.T) {
	t.Parallel()
	rs := ruleset{table: "t", chains: map[string][]string{
		"prerouting": {"hook", "jump"},
		"egress":     {"accept est", "drop a", "drop b"},
	}}
	for _, tc := range []struct {
		name string
		got  map[string][]string
		want []string
	}{
		{"equal", map[string][]string{"prerouting": {"hook", "jump"}, "egress": {"accept est", "drop a", "drop b"}}, nil},
		{"missing rule", map[string][]string{"prerouting": {"hook", "jump"}, "egress": {"accept est", "drop b"}},
			[]string{`chain egress: missing "drop a"`}},
		{"extra accept", map[string][]string{"prerouting": {"hook", "jump"}, "egress": {"accept all", "accept est", "drop a", "drop b"}},
			[]string{`chain egress: unexpected "accept all"`}},
		{"duplicate", map[string][]string{"prerouting": {"hook", "jump", "jump"}, "egress": {"accept est", "drop a", "drop b"}},
			[]string{`chain prerouting: unexpected "jump"`}},
		{"reordered", map[string][]string{"prerouting": {"hook", "jump"}, "egress": {"drop a", "accept est", "drop b"}},
			[]string{"chain egress: rules out of order"}},
		{"chains", map[string][]string{"egress": {"accept est", "drop a", "drop b"}, "zz": nil, "aa": nil},
			[]string{"chain prerouting is missing", "unexpected chain aa", "unexpected chain zz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(rs.problems(tc.got), tc.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
}

func TestOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.NetworkName != DefaultNetworkName || o.BridgeName != "agentd-sb0" || o.Subnet.String() != DefaultSubnet || o.NFT != "nft" || o.Logger == nil {
		t.Errorf("defaults: %+v", o)
	}
	// Another network gets a bridge (and so a table) of its own.
	o, err = Options{NetworkName: "agentd-sandbox-b"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.BridgeName != BridgeFor("agentd-sandbox-b") || o.BridgeName == DefaultBridgeName || !bridgeNameRE.MatchString(o.BridgeName) {
		t.Errorf("bridge of agentd-sandbox-b = %q", o.BridgeName)
	}
	for name, bad := range map[string]Options{
		"bridge too long": {BridgeName: "a-bridge-name-too-long"},
		"bridge quote":    {BridgeName: `br"0`},
		"subnet v6":       {Subnet: netip.MustParsePrefix("fd00::/64")},
		"subnet /31":      {Subnet: netip.MustParsePrefix("172.30.0.0/31")},
		"dns v6":          {AllowDNS: addrs("fd00::53")},
		"extra invalid":   {ExtraBlocked: []netip.Prefix{{}}},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions", name, err)
		}
	}
}

// BridgeFor: the default network keeps its bridge; any other name gets a
// valid Linux interface name of its own, the same every time.
func TestBridgeFor(t *testing.T) {
	t.Parallel()
	if got := BridgeFor(DefaultNetworkName); got != "agentd-sb0" {
		t.Errorf("BridgeFor(default) = %q, want agentd-sb0", got)
	}
	seen := map[string]string{}
	for _, name := range []string{"agentd-sandbox-2", "hub-b", "hub-c", strings.Repeat("x", 200)} {
		b := BridgeFor(name)
		if !bridgeNameRE.MatchString(b) || !strings.HasPrefix(b, "agsb-") || len(b) != 15 {
			t.Errorf("BridgeFor(%q) = %q: want agsb- and 10 hex digits", name, b)
		}
		if other, ok := seen[b]; ok {
			t.Errorf("BridgeFor(%q) = BridgeFor(%q) = %q", name, other, b)
		}
		seen[b] = name
		if BridgeFor(name) != b {
			t.Errorf("BridgeFor(%q) not stable", name)
		}
	}
}
