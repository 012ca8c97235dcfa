package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/devdepot-ai/agentd/internal/netblock"
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
// multicast, reserved (the list in internal/netblock, which the sandbox
// network's kernel rules drop too), the hub host's own or on a network the
// host is on (its LAN's neighbours), and dials the first of the others that
// answers. Zero fields get the defaults documented on them.
type PublicDialer struct {
	// Lookup resolves a host name. Default net.DefaultResolver.LookupNetIP.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// DialAddr connects to one checked address ("ip:port"). Default a
	// net.Dialer's DialContext.
	DialAddr func(ctx context.Context, network, addr string) (net.Conn, error)
	// HostPrefixes are the hub host's own addresses with their on-link
	// prefixes (192.0.2.7/24: the host and its LAN), refused too. Default
	// those of its network interfaces, read at each dial (a network the
	// host joins later is refused as well).
	HostPrefixes func() ([]netip.Prefix, error)
	// AllowPrivate are private destinations every sandbox may reach
	// (agenthub serve --egress-allow-private); a context from
	// WithPrivateAllow adds a sandbox's own. Loopback and the hub host's
	// own addresses stay refused. Default none.
	AllowPrivate PrivateAllow
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
	own, err := d.hostPrefixes()
	if err != nil {
		return nil, fmt.Errorf("the hub's own addresses: %w", err)
	}
	dial := d.DialAddr
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var refused, failed error
	allow := d.AllowPrivate.Merge(privateAllowFrom(ctx))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		why := forbidden(a, own)
		if why != "" && allow.Allows(host, a) {
			why = hardForbidden(a, own)
		}
		if why != "" {
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

func (d *PublicDialer) hostPrefixes() ([]netip.Prefix, error) {
	if d.HostPrefixes != nil {
		return d.HostPrefixes()
	}
	hp, err := netblock.HostPrefixes()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(hp))
	for _, p := range hp {
		out = append(out, p.Prefix)
	}
	return out, nil
}

// forbidden says why a may not be dialled, or "".
func forbidden(a netip.Addr, own []netip.Prefix) string {
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
	if why := netblock.Why(a); why != "" {
		return why
	}
	for _, o := range own {
		switch {
		case o.Addr().Unmap() == a:
			return "the hub host's own"
		case o.Masked().Contains(a):
			return "on the hub host's network " + o.Masked().String()
		}
	}
	return ""
}
