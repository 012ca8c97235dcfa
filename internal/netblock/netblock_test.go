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
