package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ErrForbiddenAddress: the destination is, or resolves only to, an address
// no sandbox may reach (private, loopback, link-local, the hub's host …).
var ErrForbiddenAddress = errors.New("forbidden address")

// AddressError says which address a host was refused for, and why.
type AddressError struct {
	Host string
	Addr netip.Addr
	Why  string // "private", "loopback", "an address of the hub's host", …
}

func (e *AddressError) Error() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is an address sandboxes may not reach (%s)", e.Host, e.Why)
	}
	return fmt.Sprintf("%s resolves to %s, an address sandboxes may not reach (%s)", e.Host, e.Addr, e.Why)
}

// Unwrap makes errors.Is(err, ErrForbiddenAddress) hold.
func (e *AddressError) Unwrap() error { return ErrForbiddenAddress }

// PublicDialer dials only public addresses: it resolves the host itself,
// drops every address that is private, loopback, link-local, CGNAT,
// multicast, reserved or the hub host's own, and dials the first of the
// others that answers. Zero fields get the defaults documented on them.
type PublicDialer struct {
	// Lookup resolves a host name. Default net.DefaultResolver.LookupNetIP.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// DialAddr connects to one checked address ("ip:port"). Default a
	// net.Dialer's DialContext.
	DialAddr func(ctx context.Context, network, addr string) (net.Conn, error)
	// HostAddrs are the hub host's own addresses, refused too. Default the
	// addresses of its network interfaces, read at each dial (an address
	// the host gains later is refused as well).
	HostAddrs func() ([]netip.Addr, error)
}

// Dial connects to host:port if host is, or resolves to, a public address;
// otherwise an *AddressError (errors.Is ErrForbiddenAddress) naming the
// first refused address.
func (d *PublicDialer) Dial(ctx context.Context, host string, port int) (net.Conn, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := d.Lookup
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = lookup(ctx, host); err != nil {
			return nil, err
		}
	}
	own, err := d.hostAddrs()
	if err != nil {
		return nil, fmt.Errorf("the hub's own addresses: %w", err)
	}
	dial := d.DialAddr
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var refused, failed error
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if why := forbidden(a, own); why != "" {
			if refused == nil {
				refused = &AddressError{Host: host, Addr: a, Why: why}
			}
			continue
		}
		c, err := dial(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		failed = err
	}
	switch {
	case failed != nil:
		return nil, failed
	case refused != nil:
		return nil, refused
	}
	return nil, fmt.Errorf("%s: no address", host)
}

func (d *PublicDialer) hostAddrs() ([]netip.Addr, error) {
	if d.HostAddrs != nil {
		return d.HostAddrs()
	}
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(ifs))
	for _, a := range ifs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// blocked are the ranges refused beyond what netip classifies, each with
// what it is.
var blocked = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// forbidden says why a may not be dialled, or "".
func forbidden(a netip.Addr, own []netip.Addr) string {
	switch {
	case !a.IsValid() || a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case !a.IsGlobalUnicast():
		return "non-unicast"
	}
	for _, b := range blocked {
		if b.p.Contains(a) {
			return b.why
		}
	}
	for _, o := range own {
		if o == a {
			return "the hub host's own"
		}
	}
	return ""
}
