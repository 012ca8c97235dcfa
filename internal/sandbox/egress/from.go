package egress

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
)

// loopback is never allowed, whatever a list says.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// AllowFrom lets the sandbox at src (its address on the network) reach the
// private destinations dests besides those every sandbox may reach: one
// accept per destination, matched by source address, after the drop of
// the host's own addresses and before the private-range drops. It replaces
// what src had; empty dests is Forget. The table is replaced as one nft
// transaction and read back, so a failure leaves no half-installed rules
// in force unnoticed (the error says so, and the guard's next tick
// re-installs). dests must be IPv4 prefixes of /8 or longer, outside
// loopback and the network's own subnet; src must be in the subnet.
func (n *Network) AllowFrom(ctx context.Context, src netip.Addr, dests []netip.Prefix) error {
	src = src.Unmap()
	if !src.Is4() || !n.Subnet.Contains(src) {
		return fmt.Errorf("%w: source %s: want an address in the sandbox network %s", ErrInvalidOptions, src, n.Subnet)
	}
	var list []netip.Prefix
	for _, p := range dests {
		if !p.IsValid() || !p.Addr().Unmap().Is4() || p.Bits() < 8 {
			return fmt.Errorf("%w: allowed private destination %s: want an IPv4 prefix of /8 or longer", ErrInvalidOptions, p)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked()
		if p.Overlaps(loopback) || p.Overlaps(n.Subnet) {
			return fmt.Errorf("%w: allowed private destination %s: loopback and the sandbox network itself stay refused", ErrInvalidOptions, p)
		}
		if !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	n.mu.Lock()
	if len(list) == 0 && n.from[src] == nil {
		n.mu.Unlock()
		return nil
	}
	if n.from == nil {
		n.from = map[netip.Addr][]netip.Prefix{}
	}
	if len(list) == 0 {
		delete(n.from, src)
	} else {
		n.from[src] = list
	}
	n.mu.Unlock()
	return n.Reinstall(ctx)
}

// Forget removes src's own accepts (AllowFrom); a source without any is
// not an error and changes nothing.
func (n *Network) Forget(ctx context.Context, src netip.Addr) error {
	return n.AllowFrom(ctx, src, nil)
}

// Sources returns the addresses that have accepts of their own, sorted.
func (n *Network) Sources() []netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]netip.Addr, 0, len(n.from))
	for a := range n.from {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Retain forgets, in one transaction, every source keep returns false for
// (the hub's reconcile: sandboxes that no longer exist lose their rules).
func (n *Network) Retain(ctx context.Context, keep func(netip.Addr) bool) error {
	n.mu.Lock()
	changed := false
	for a := range n.from {
		if !keep(a) {
			delete(n.from, a)
			changed = true
		}
	}
	n.mu.Unlock()
	if !changed {
		return nil
	}
	return n.Reinstall(ctx)
}
