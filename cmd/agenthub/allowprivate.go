package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/spf13/pflag"

	"github.com/devdepot-ai/agentd/internal/egressproxy"
)

// registerAllowPrivate adds --egress-allow-private to serve's flags.
func (f *sandboxFlags) registerAllowPrivate(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.allowPrivate, "egress-allow-private", nil,
		"let sandboxes reach this private destination (CIDR, address or host name; repeatable or comma-separated), "+
			"through the egress proxy and the sandbox network's kernel rules; every other private address, loopback and "+
			"the hub host's own addresses stay blocked. A host name is resolved once at start for the kernel rules")
}

// allowPrivateOptions reads --egress-allow-private: what the proxy's dialer
// allows, and the IPv4 prefixes the kernel rules accept (host names
// resolved now).
func (f *sandboxFlags) allowPrivateOptions(ctx context.Context) (egressproxy.PrivateAllow, []netip.Prefix, error) {
	a, err := egressproxy.ParsePrivateAllow(f.allowPrivate)
	if err != nil {
		return a, nil, usageError{fmt.Errorf("--egress-allow-private: %w", err)}
	}
	var kernel []netip.Prefix
	for _, p := range a.Prefixes {
		if p.Addr().Is4() {
			kernel = append(kernel, p)
		}
	}
	for _, h := range a.Hosts {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip4", h)
		cancel()
		if err != nil {
			return a, nil, usageError{fmt.Errorf("--egress-allow-private %s: %w", h, err)}
		}
		for _, ad := range addrs {
			kernel = append(kernel, netip.PrefixFrom(ad.Unmap(), 32))
		}
	}
	return a, kernel, nil
}
