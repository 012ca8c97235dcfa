// Package netblock is the one list of destination ranges no sandbox may
// reach, shared by the kernel rules of the sandbox network
// (internal/sandbox/egress, IPv4 entries) and the hub's egress proxy
// (internal/egressproxy, both families): a range added here is refused by
// both, so the two cannot drift apart.
package netblock

import (
	"net"
	"net/netip"
)

// Range is one blocked range and what it is.
type Range struct {
	Prefix netip.Prefix
	Why    string
}

// ranges is the list; IPv4 first, in the order the kernel rules list them.
var ranges = []Range{
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
}

// Ranges returns the list, a fresh slice on every call.
func Ranges() []Range { return append([]Range(nil), ranges...) }

// IPv4 returns the IPv4 prefixes of the list, a fresh slice.
func IPv4() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range ranges {
		if r.Prefix.Addr().Is4() {
			out = append(out, r.Prefix)
		}
	}
	return out
}

// Why returns what a is, if the list holds it ("" otherwise). a is
// unmapped first (::ffff:10.0.0.1 is 10.0.0.1).
func Why(a netip.Addr) string {
	a = a.Unmap()
	for _, r := range ranges {
		if r.Prefix.Contains(a) {
			return r.Why
		}
	}
	return ""
}

// HostPrefix is an address the host holds, with the on-link network it
// sits on and the interface.
type HostPrefix struct {
	Interface string
	Prefix    netip.Prefix // the address with its interface's mask
}

// HostPrefixes lists every address of every host interface with its prefix
// length: the on-link networks the host reaches without a router, whose
// neighbours (a LAN that is not RFC 1918, a cloud's subnet) no sandbox may
// reach either.
func HostPrefixes() ([]HostPrefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []HostPrefix
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			out = append(out, HostPrefix{Interface: ifc.Name, Prefix: onLink(ip, ones)})
		}
	}
	return out, nil
}

// onLink is the on-link network of a host address with a mask of ones
// bits. A network wider than /8 (IPv4) or /32 (IPv6) is not a LAN but a
// misconfiguration or a catch-all route: dropping it would cut off all
// egress, so only the address itself is taken.
func onLink(ip netip.Addr, ones int) netip.Prefix {
	if ip.Is4In6() {
		ip = ip.Unmap()
		if ones > 32 {
			ones -= 96
		}
	}
	switch {
	case ip.Is4() && ones < 8:
		ones = 32
	case ip.Is6() && ones < 32:
		ones = 128
	}
	return netip.PrefixFrom(ip, ones) // the address kept: its own is dropped too
}
