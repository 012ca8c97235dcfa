package sandboxes

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/transport"
)

// SandboxSocketName is the unix socket the hub serves sandboxes on, in
// Options.SocketDir.
const SandboxSocketName = "hub.sock"

// Bounds of the socket's HTTP server, as the hub's port has them.
const (
	maxHeaderBytes  = 64 << 10
	idleConnTimeout = 5 * time.Minute
)

// IsID reports whether a machine id is a sandbox's.
func IsID(id string) bool { return strings.HasPrefix(id, "sb-") }

// socket is the hub's end of the sandboxes' unix socket: their tunnels,
// and CONNECT to their egress proxy.
type socket struct {
	lis      net.Listener // with the hub's connection caps
	acceptor *transport.Acceptor
	http     *http.Server
	egress   *egressproxy.Proxy
	// The same over TLS on Options.TunnelListener (nil without one):
	// its own acceptor, bound to the advertised host.
	tcpLis      net.Listener
	tcpAcceptor *transport.Acceptor
	tcpHTTP     *http.Server
}

// listen prepares the socket's and the keys' directories and listens on
// the socket.
func (m *Manager) listen() (*socket, error) {
	o := m.o
	// Mounted into every sandbox, where uid 1000 must reach the socket.
	if err := os.MkdirAll(o.SocketDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox socket dir: %w", err)
	}
	if err := os.Chmod(o.SocketDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox socket dir: %w", err)
	}
	// The sandboxes' keys: the hub's alone (each sandbox gets a mount of
	// its own subdirectory's mnt, never of this one).
	if err := os.MkdirAll(o.KeyDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox key dir: %w", err)
	}
	if err := os.Chmod(o.KeyDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox key dir: %w", err)
	}
	// listen.Listen replaces a stale socket of an earlier run, but not
	// one another hub still serves, nor a file that is not a socket.
	sock := filepath.Join(o.SocketDir, SandboxSocketName)
	lis, err := listen.Listen(listen.Addr{Network: "unix", Address: sock})
	if errors.Is(err, listen.ErrInUse) {
		return nil, fmt.Errorf("sandbox socket %s: another agenthub is %w", sock, listen.ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox socket: %w", err)
	}
	// uid 1000 in every sandbox dials it; the directory is mounted into
	// sandboxes only, and the tunnel proves each one with its own key.
	if err := os.Chmod(sock, 0o666); err != nil {
		lis.Close()
		return nil, fmt.Errorf("sandbox socket: %w", err)
	}
	s := &socket{lis: lis}
	s.acceptor, err = transport.NewAcceptor(transport.AcceptorOptions{
		Authenticate: m.authenticate,
		OnTunnel:     o.OnTunnel,
		Host:         transport.UnixHost,
		Logger:       o.Logger.Named("sandbox"),
	})
	if err != nil {
		lis.Close()
		return nil, err
	}
	// The hub's end of the sandboxes' egress proxy (package egressproxy
	// says why a proxy).
	s.egress, err = egressproxy.NewProxy(egressproxy.ProxyOptions{
		Lookup: m.egressLookup,
		Dial:   o.EgressDial,
		// The real hosts of brokered credentials.
		UpstreamRoots: o.EgressRoots,
		Record:        m.recordEgress,
		Logger:        o.Logger.Named("sandbox"),
		// Now stays the real clock, not Options.Now: the sandboxes sign
		// their requests with it.
	})
	if err != nil {
		_ = s.acceptor.Close()
		lis.Close()
		return nil, err
	}
	s.http = s.server(s.acceptor, o.Logger)
	if o.LimitConns != nil {
		s.lis = o.LimitConns(lis)
	}
	if o.TunnelListener != nil {
		if err := m.listenTCP(s); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// server is the socket's HTTP server for the tunnels acc accepts: GET
// /v1/tunnel, and CONNECT to the egress proxy.
func (s *socket) server(acc *transport.Acceptor, log *zap.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/tunnel", acc)
	// CONNECT to the egress proxy, everything else (the tunnel) to mux.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			s.egress.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: maxHeaderBytes,
		IdleTimeout: idleConnTimeout, ErrorLog: zap.NewStdLog(log.Named("sandbox.http"))}
}

// listenTCP adds the TLS listener to s (tunnel_tcp.go).
func (m *Manager) listenTCP(s *socket) error {
	o := m.o
	ca, err := tunnelCA(o.TunnelCADir, o.Now())
	if err != nil {
		return err
	}
	cfg, err := tunnelTLS(ca, o.TunnelAdvertise)
	if err != nil {
		return err
	}
	m.tunnelCAPEM = ca.CertPEM()
	s.tcpAcceptor, err = transport.NewAcceptor(transport.AcceptorOptions{
		Authenticate: m.authenticate,
		OnTunnel:     o.OnTunnel,
		Host:         o.TunnelAdvertise,
		Logger:       o.Logger.Named("sandbox-tcp"),
	})
	if err != nil {
		return err
	}
	lis := o.TunnelListener
	if o.LimitConns != nil {
		lis = o.LimitConns(lis)
	}
	s.tcpLis = tls.NewListener(lis, cfg)
	s.tcpHTTP = s.server(s.tcpAcceptor, o.Logger)
	m.log.Info("serving sandboxes over TCP", zap.String("listen", o.TunnelListener.Addr().String()),
		zap.String("advertise", o.TunnelAdvertise), zap.Bool("sandboxes_dial_it", o.TunnelDial))
	return nil
}

// serve serves the socket (and its TCP listener) until close.
func (s *socket) serve() {
	if s.tcpHTTP == nil {
		_ = s.http.Serve(s.lis)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.tcpHTTP.Serve(s.tcpLis)
	}()
	_ = s.http.Serve(s.lis)
	<-done
}

// close stops the socket: its tunnels' acceptors, its servers, the proxy.
func (s *socket) close() {
	_ = s.acceptor.Close()
	_ = s.http.Close()
	if s.tcpAcceptor != nil {
		_ = s.tcpAcceptor.Close()
	}
	if s.tcpHTTP != nil {
		_ = s.tcpHTTP.Close()
	}
	if s.tcpLis != nil {
		_ = s.tcpLis.Close() // when Serve never ran
	}
	_ = s.egress.Close()
}

// authenticate admits, on the sandboxes' socket and its TCP listener,
// only sandboxes.
func (m *Manager) authenticate(ctx context.Context, id string) (ed25519.PublicKey, string, error) {
	if !IsID(id) {
		return nil, "", fmt.Errorf("the sandboxes' socket takes sandbox ids only; machine %s dials the hub's public port: %w", id, transport.ErrWrongEndpoint)
	}
	return m.o.Authenticate(ctx, id)
}

// Refused counts the tunnel handshakes the socket refused, by reason (the
// reasons and their order are the transport's, as on the hub's port).
func (m *Manager) Refused() []transport.RefusalCount {
	if m.sock == nil {
		return nil
	}
	if m.sock.tcpAcceptor == nil {
		return m.sock.acceptor.Refused()
	}
	return addRefusals(m.sock.acceptor.Refused(), m.sock.tcpAcceptor.Refused())
}

// addRefusals adds b's counts to a's, keeping a's order and adding b's
// other reasons after it.
func addRefusals(a, b []transport.RefusalCount) []transport.RefusalCount {
	out := append([]transport.RefusalCount(nil), a...)
	for _, c := range b {
		found := false
		for i := range out {
			if out[i].Reason == c.Reason {
				out[i].Count += c.Count
				found = true
			}
		}
		if !found {
			out = append(out, c)
		}
	}
	return out
}
