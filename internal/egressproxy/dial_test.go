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

// The default dialer refuses every address a sandbox must not reach, by
// what the name resolves to, and dials only checked addresses. No traffic
// is sent: resolving and dialing are replaced by recorders.
func TestPublicDialerRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	own := netip.MustParsePrefix("203.0.113.7/24") // "the hub's host" on its LAN
	for _, tc := range []struct {
		resolves []string
		want     string // "": dialled (the first public address)
	}{
		{[]string{"10.1.2.3"}, "private"},
		{[]string{"172.17.0.1"}, "private"},
		{[]string{"192.168.1.1"}, "private"},
		{[]string{"127.0.0.1"}, "loopback"},
		{[]string{"::1"}, "loopback"},
		{[]string{"169.254.169.254"}, "link-local"},
		{[]string{"fe80::1"}, "link-local"},
		{[]string{"fd00::1"}, "private"},
		{[]string{"100.64.1.1"}, "carrier-grade NAT"},
		{[]string{"0.0.0.0"}, "unspecified"},
		{[]string{"0.1.2.3"}, `"this network"`},
		{[]string{"224.0.0.1"}, "multicast"},
		{[]string{"255.255.255.255"}, "non-unicast"},
		{[]string{"240.0.0.1"}, "reserved"},
		{[]string{"::ffff:10.0.0.1"}, "private"}, // IPv4-mapped
		{[]string{"64:ff9b::a00:1"}, "NAT64"},
		{[]string{"2002:a00:1::1"}, "6to4"},
		{[]string{"203.0.113.7"}, "the hub host's own"},
		{[]string{"203.0.113.99"}, "on the hub host's network 203.0.113.0/24"}, // a LAN neighbour
		{[]string{"192.0.0.9"}, "IETF protocol"},
		{[]string{"198.18.3.4"}, "benchmarking"},
		{[]string{"fec0::1"}, "site-local"},
		// A name with a private and a public address: only the public one
		// is dialled.
		{[]string{"10.0.0.1", "198.51.100.9"}, ""},
		{[]string{"2001:db8::5"}, ""},
	} {
		var dialled []string
		d := &PublicDialer{
			Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
				if host != "api.example.com" {
					t.Errorf("looked up %q", host)
				}
				var out []netip.Addr
				for _, s := range tc.resolves {
					out = append(out, netip.MustParseAddr(s))
				}
				return out, nil
			},
			DialAddr: func(_ context.Context, network, addr string) (net.Conn, error) {
				dialled = append(dialled, addr)
				a, _ := net.Pipe()
				return a, nil
			},
			HostPrefixes: func() ([]netip.Prefix, error) { return []netip.Prefix{own}, nil },
		}
		c, err := d.Dial(t.Context(), "api.example.com", 443)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v; want a connection", tc.resolves, err)
				continue
			}
			c.Close()
			last := tc.resolves[len(tc.resolves)-1]
			if diff := cmp.Diff(dialled, []string{net.JoinHostPort(last, "443")}); diff != "" {
				t.Errorf("%v: dialled (-got +want):\n%s", tc.resolves, diff)
			}
			continue
		}
		var ae *AddressError
		if !errors.Is(err, ErrForbiddenAddress) || !errors.As(err, &ae) || !strings.Contains(err.Error(), "("+tc.want+")") {
			t.Errorf("%v: %v; want ErrForbiddenAddress (%s)", tc.resolves, err, tc.want)
		}
		if len(dialled) != 0 {
			t.Errorf("%v: dialled %v", tc.resolves, dialled)
		}
	}
}

// An address literal is checked without a lookup; a lookup failure is
// passed on as is.
func TestPublicDialerLiteralsAndLookupErrors(t *testing.T) {
	t.Parallel()
	errNX := errors.New("no such host")
	d := &PublicDialer{
		Lookup: func(context.Context, string) ([]netip.Addr, error) { return nil, errNX },
		DialAddr: func(context.Context, string, string) (net.Conn, error) {
			t.Error("dialled")
			return nil, errors.New("no")
		},
		HostPrefixes: func() ([]netip.Prefix, error) { return nil, nil },
	}
	if _, err := d.Dial(t.Context(), "169.254.169.254", 80); !errors.Is(err, ErrForbiddenAddress) ||
		err.Error() != "169.254.169.254 is an address sandboxes may not reach (link-local)" {
		t.Errorf("a link-local literal: %v", err)
	}
	if _, err := d.Dial(t.Context(), "[::1]", 443); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("a loopback literal: %v", err)
	}
	if _, err := d.Dial(t.Context(), "gone.example.com", 443); !errors.Is(err, errNX) {
		t.Errorf("a lookup failure: %v", err)
	}
}

// With nothing injected, the host's own loopback is refused before any
// connection is tried (the only traffic this could send is to loopback).
func TestPublicDialerDefaults(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := lis.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := lis.Addr().(*net.TCPAddr).Port
	if _, err := (&PublicDialer{}).Dial(t.Context(), "127.0.0.1", port); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("127.0.0.1: %v; want ErrForbiddenAddress", err)
	}
	if _, err := (&PublicDialer{}).Dial(t.Context(), "localhost", port); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("localhost: %v; want ErrForbiddenAddress", err)
	}
	select {
	case <-accepted:
		t.Error("the listener was connected to")
	default:
	}
}
