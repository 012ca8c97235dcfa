package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
)

// DialHub opens a plain connection to the endpoint the tunnel dials, for
// another protocol the hub serves there (a sandbox's egress proxy sends
// its CONNECTs this way): the unix socket of a unix:// hub, or a TCP
// connection to the hub's host and port, with TLS for wss:// verified as
// the tunnel's is (Options.RootCAs, the URL's host). It dials directly:
// Options.Proxy is not used (a sandbox's agentd has no proxy but its own).
// HandshakeTimeout bounds the dial and the TLS handshake.
func (t *Tunnel) DialHub(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	if t.sock != "" {
		c, err := d.DialContext(ctx, "unix", t.sock)
		if err != nil {
			return nil, fmt.Errorf("dial hub: %w", err)
		}
		return c, nil
	}
	u, err := url.Parse(t.url)
	if err != nil {
		return nil, fmt.Errorf("dial hub: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "wss" {
			port = "443"
		}
	}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil, fmt.Errorf("dial hub: %w", err)
	}
	if u.Scheme != "wss" {
		return c, nil // ws:// is for a loopback hub only (tunnelURL)
	}
	cfg := t.tlsConf.Clone()
	cfg.ServerName = u.Hostname()
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("dial hub: %w", err)
	}
	return tc, nil
}
