package egressproxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPublicDialerAllowPrivate: the hub's allowed private destinations and
// a sandbox's own (through the context) are dialled, by prefix and by
// name; every other private address stays refused, and loopback and the
// hub host's own addresses stay refused even inside an allowed prefix.
func TestPublicDialerAllowPrivate(t *testing.T) {
	t.Parallel()
	hub, err := ParsePrivateAllow([]string{"10.20.0.0/16,mirror.internal", "192.168.7.7"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := ParsePrivateAllow([]string{"172.16.5.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{
		"a.example.com": "10.20.1.2", "b.example.com": "10.21.0.1", "mirror.internal": "10.99.0.1",
		"c.example.com": "192.168.7.7", "d.example.com": "192.168.7.8", "e.example.com": "172.16.5.9",
		"hub.example.com": "10.20.0.1", // the hub host's own address, inside an allowed prefix
		"lan.example.com": "10.20.0.9", // on the hub host's network, inside an allowed prefix
	}
	d := &PublicDialer{
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(names[host])}, nil
		},
		DialAddr: func(context.Context, string, string) (net.Conn, error) {
			a, _ := net.Pipe()
			return a, nil
		},
		HostPrefixes: func() ([]netip.Prefix, error) { return []netip.Prefix{netip.MustParsePrefix("10.20.0.1/24")}, nil },
		AllowPrivate: hub,
	}
	for _, tc := range []struct {
		host    string
		withOwn bool
		want    string // "": dialled
	}{
		{"a.example.com", false, ""},
		{"b.example.com", false, "private"},
		{"mirror.internal", false, ""},
		{"c.example.com", false, ""},
		{"d.example.com", false, "private"},
		{"e.example.com", false, "private"},
		{"e.example.com", true, ""},
		{"hub.example.com", false, "the hub host's own"},
		{"lan.example.com", false, ""},
	} {
		ctx := t.Context()
		if tc.withOwn {
			ctx = WithPrivateAllow(ctx, own)
		}
		c, err := d.Dial(ctx, tc.host, 443)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want a connection", tc.host, err)
		case tc.want != "" && (!errors.Is(err, ErrForbiddenAddress) || !strings.Contains(err.Error(), "("+tc.want+")")):
			t.Errorf("%s: %v; want refused (%s)", tc.host, err, tc.want)
		}
		if c != nil {
			c.Close()
		}
	}
}

// TestParsePrivateAllow: CIDRs, addresses and names, in lists; loopback,
// public ranges, huge prefixes and garbage refused, saying why.
func TestParsePrivateAllow(t *testing.T) {
	t.Parallel()
	a, err := ParsePrivateAllow([]string{"10.20.1.9/16, Mirror.Internal", "192.168.1.5", "fd00:1::/64", "10.20.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.Strings(), []string{"10.20.0.0/16", "192.168.1.5/32", "fd00:1::/64", "mirror.internal"}); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	for in, want := range map[string]string{
		"127.0.0.1":          "loopback",
		"0.0.0.0/0":          "fewer than 8 bits",
		"8.8.8.8":            "public",
		"1.0.0.0/8":          "public",
		"224.0.0.1":          "not a unicast",
		"http://x/":          "want a CIDR",
		"mirror.internal:80": "without a port",
		"*.internal.corp":    "without a port or wildcard",
	} {
		if _, err := ParsePrivateAllow([]string{in}); !errors.Is(err, ErrBadPrivateAllow) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error saying %q", in, err, want)
		}
	}
}
