package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/devdepot-ai/agentd/internal/allowlist"
)

// PrivateAllow is what an admin lets sandboxes reach although it is
// private (an internal package mirror): address prefixes, and host names
// whose every address is allowed. Loopback, the hub host's own addresses,
// multicast and unspecified addresses stay refused whatever it says.
type PrivateAllow struct {
	Prefixes []netip.Prefix
	Hosts    []string // normalised host names
}

// ErrBadPrivateAllow: an --egress-allow-private entry that is neither a
// CIDR, an address nor a host name, or one that can never be allowed.
var ErrBadPrivateAllow = errors.New("bad private destination")

// ParsePrivateAllow reads entries of CIDR, IP or HOST, each possibly a
// comma-separated list.
func ParsePrivateAllow(entries []string) (PrivateAllow, error) {
	var a PrivateAllow
	for _, e := range entries {
		for s := range strings.SplitSeq(e, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if err := a.add(s); err != nil {
				return PrivateAllow{}, err
			}
		}
	}
	return a, nil
}

func (a *PrivateAllow) add(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrBadPrivateAllow, truncate(s), why)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		if ad, aerr := netip.ParseAddr(s); aerr == nil {
			p, err = netip.PrefixFrom(ad, ad.BitLen()), nil
		}
	}
	if err == nil {
		p = netip.PrefixFrom(p.Addr().Unmap().WithZone(""), min(p.Bits(), p.Addr().Unmap().BitLen())).Masked()
		ad := p.Addr()
		switch {
		case p.Bits() < 8:
			return bad("a prefix of fewer than 8 bits allows too much")
		case ad.IsLoopback() || netip.MustParsePrefix("127.0.0.0/8").Overlaps(p) || p.Contains(netip.IPv6Loopback()):
			return bad("loopback is the hub's own host; sandboxes never reach it")
		case ad.IsMulticast() || ad.IsUnspecified() && p.Bits() == ad.BitLen():
			return bad("not a unicast destination")
		case forbidden(ad, nil) == "" && forbidden(lastAddr(p), nil) == "":
			return bad("a public destination: sandboxes with network access reach it already (an agent run's allow list names hosts: --allow)")
		}
		if !slices.Contains(a.Prefixes, p) {
			a.Prefixes = append(a.Prefixes, p)
		}
		return nil
	}
	e, perr := allowlist.Parse(strings.ToLower(s))
	switch {
	case perr != nil:
		return bad("want a CIDR (10.20.0.0/16), an address or a host name (mirror.internal)")
	case e.Wildcard || strings.Contains(s, ":"):
		return bad("a host name without a port or wildcard")
	}
	if !slices.Contains(a.Hosts, e.Host) {
		a.Hosts = append(a.Hosts, e.Host)
	}
	return nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Empty reports whether it allows nothing.
func (a PrivateAllow) Empty() bool { return len(a.Prefixes) == 0 && len(a.Hosts) == 0 }

// Strings lists its entries, prefixes first, as ParsePrivateAllow reads
// them.
func (a PrivateAllow) Strings() []string {
	var out []string
	for _, p := range a.Prefixes {
		out = append(out, p.String())
	}
	return append(out, a.Hosts...)
}

// Merge is a and b together.
func (a PrivateAllow) Merge(b PrivateAllow) PrivateAllow {
	out := PrivateAllow{Prefixes: slices.Clone(a.Prefixes), Hosts: slices.Clone(a.Hosts)}
	for _, p := range b.Prefixes {
		if !slices.Contains(out.Prefixes, p) {
			out.Prefixes = append(out.Prefixes, p)
		}
	}
	for _, h := range b.Hosts {
		if !slices.Contains(out.Hosts, h) {
			out.Hosts = append(out.Hosts, h)
		}
	}
	return out
}

// Allows reports whether addr, which host resolved to, is allowed
// although private. The hard refusals (hardForbidden) are not its to lift.
func (a PrivateAllow) Allows(host string, addr netip.Addr) bool {
	if slices.Contains(a.Hosts, allowlist.Normalize(strings.Trim(host, "[]"))) {
		return true
	}
	for _, p := range a.Prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

type privateAllowKey struct{}

// WithPrivateAllow returns ctx carrying a sandbox's own private
// destinations, which PublicDialer.Dial allows besides its AllowPrivate.
func WithPrivateAllow(ctx context.Context, a PrivateAllow) context.Context {
	if a.Empty() {
		return ctx
	}
	return context.WithValue(ctx, privateAllowKey{}, a)
}

func privateAllowFrom(ctx context.Context) PrivateAllow {
	a, _ := ctx.Value(privateAllowKey{}).(PrivateAllow)
	return a
}

// hardForbidden says why a may not be dialled even when an admin allows it
// as a private destination, or "".
func hardForbidden(a netip.Addr, own []netip.Prefix) string {
	switch {
	case !a.IsValid() || a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsMulticast():
		return "multicast"
	}
	for _, o := range own {
		if o.Addr().Unmap() == a {
			return "the hub host's own"
		}
	}
	return ""
}
