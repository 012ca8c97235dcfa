package egress

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/moby/moby/client"
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
	list, err := n.checkDests(dests)
	if err != nil {
		return err
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

// SyncContainers makes the per-source accepts exactly want's: container ID
// -> the private destinations its sandbox's environment allows. Each
// container's address on the network is read from the engine now (a
// restarted container may have another), and a container that is not
// running, not on the network or gone gets none, and so does one whose
// list is refused (named in the error, the others still installed); every source not in
// want loses its accepts (a removed sandbox, or one whose environment's
// list was emptied). The table is replaced, in one transaction, only when
// the accepts change. An engine error leaves the accepts as they were.
func (n *Network) SyncContainers(ctx context.Context, want map[string][]netip.Prefix) error {
	from := map[netip.Addr][]netip.Prefix{}
	var bad error // a container whose list cannot be installed gets none
	if len(want) > 0 {
		cli, err := n.client()
		if err != nil {
			return err
		}
		defer cli.Close()
		for id, dests := range want {
			if len(dests) == 0 {
				continue
			}
			src, err := containerAddr(ctx, cli, id, n.Name)
			if err != nil {
				return err
			}
			if !src.IsValid() {
				continue
			}
			list, err := n.checkDests(dests)
			if err != nil {
				bad = errors.Join(bad, fmt.Errorf("container %s: %w", id, err))
				continue
			}
			from[src] = list
		}
	}
	n.mu.Lock()
	same := maps.EqualFunc(from, n.from, slices.Equal)
	if !same {
		n.from = from
	}
	n.mu.Unlock()
	if same {
		return bad
	}
	return errors.Join(n.Reinstall(ctx), bad)
}

// containerAddr is a running container's IPv4 address on the network
// called net; the zero Addr when it is gone, stopped or not on it.
func containerAddr(ctx context.Context, cli *client.Client, id, net string) (netip.Addr, error) {
	res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return netip.Addr{}, nil
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("inspect container %s: %w", id, err)
	}
	c := res.Container
	if c.State == nil || !c.State.Running || c.NetworkSettings == nil {
		return netip.Addr{}, nil
	}
	ep := c.NetworkSettings.Networks[net]
	if ep == nil || !ep.IPAddress.IsValid() {
		return netip.Addr{}, nil
	}
	return ep.IPAddress.Unmap(), nil
}

// checkDests validates and normalises a source's destinations (see
// AllowFrom), without repeats.
func (n *Network) checkDests(dests []netip.Prefix) ([]netip.Prefix, error) {
	var list []netip.Prefix
	for _, p := range dests {
		if !p.IsValid() || !p.Addr().Unmap().Is4() || p.Bits() < 8 {
			return nil, fmt.Errorf("%w: allowed private destination %s: want an IPv4 prefix of /8 or longer", ErrInvalidOptions, p)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked()
		if p.Overlaps(loopback) || p.Overlaps(n.Subnet) {
			return nil, fmt.Errorf("%w: allowed private destination %s: loopback and the sandbox network itself stay refused", ErrInvalidOptions, p)
		}
		if !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	return list, nil
}
