package netblock

import (
	"net/netip"
	"testing"
)

func TestWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, want string }{
		{"10.1.2.3", "private"},
		{"192.0.0.170", "IETF protocol"},
		{"198.19.255.1", "benchmarking"},
		{"100.100.100.200", "carrier-grade NAT"},
		{"::ffff:169.254.169.254", "link-local"},
		{"fd12::1", "private"},
		{"64:ff9b::808:808", "NAT64"},
		{"198.51.100.7", ""},
		{"2001:db8::1", ""},
	} {
		if got := Why(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Why(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// IPv4 is every IPv4 range of the list (what the kernel rules drop), and
// only those.
func TestIPv4(t *testing.T) {
	t.Parallel()
	n := 0
	for _, r := range Ranges() {
		if r.Prefix.Addr().Is4() {
			n++
		}
	}
	v4 := IPv4()
	if len(v4) != n || n == 0 {
		t.Fatalf("IPv4() has %d prefixes, the list %d", len(v4), n)
	}
	for _, p := range v4 {
		if !p.Addr().Is4() || Why(p.Addr()) == "" {
			t.Errorf("IPv4() holds %s", p)
		}
	}
}

// A host address's on-link network is taken as its mask says, except a
// catch-all one (wider than /8, or /32 for IPv6), which would block every
// destination: then only the address itself.
func TestOnLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ip   string
		ones int
		want string
	}{
		{"192.168.1.7", 24, "192.168.1.7/24"},
		{"203.0.113.9", 8, "203.0.113.9/8"},
		{"203.0.113.9", 1, "203.0.113.9/32"},
		{"10.0.0.1", 0, "10.0.0.1/32"},
		{"::ffff:192.0.2.1", 120, "192.0.2.1/24"},
		{"2001:db8::1", 64, "2001:db8::1/64"},
		{"2001:db8::1", 16, "2001:db8::1/128"},
	} {
		if got := onLink(netip.MustParseAddr(tc.ip), tc.ones).String(); got != tc.want {
			t.Errorf("onLink(%s, %d) = %s, want %s", tc.ip, tc.ones, got, tc.want)
		}
	}
}
