package pairing

import (
	"net"
	"net/netip"
)

// clientKey is the rate-limit key for a remote address ("host:port" or a
// bare host): the IPv4 address, or the IPv6 /64 (one host commonly holds a
// whole /64), or the string itself if it is not an IP.
func clientKey(remoteAddr string) string {
	host := clientHost(remoteAddr)
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// clientHost is the host part of a remote address, at most 64 bytes (what
// the store records as the address a code was redeemed from).
func clientHost(remoteAddr string) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	if len(host) > 64 {
		host = host[:64]
	}
	return host
}
