package conns

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address of the client that sent r: its connection's
// remote address, unless that is a trusted reverse proxy, in which case
// the rightmost address of X-Forwarded-For that is not itself a trusted
// proxy (what a client prepends to the header is never believed, since
// each proxy appends the address it saw).
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	if len(trusted) == 0 {
		return r.RemoteAddr
	}
	if !isTrusted(r.RemoteAddr, trusted) {
		return r.RemoteAddr
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return r.RemoteAddr // a hop we cannot read: go no further
		}
		if !inAny(a, trusted) {
			return a.String()
		}
	}
	return r.RemoteAddr
}

func isTrusted(remote string, trusted []netip.Prefix) bool {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	return err == nil && inAny(a, trusted)
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
