package egressproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/allowlist"
)

// Inject is a header the hub sets on every request a sandbox sends to one
// host: the credential is brokered, it never enters the sandbox.
type Inject struct {
	// Host is the destination's name as the allow list normalises it
	// (lower case, no trailing dot); Port its port (443 unless given).
	Host string
	Port int
	// Header is the header's name; whatever the sandbox sent under it is
	// replaced.
	Header string
	// Value is the header's whole value, the secret in it.
	Value []byte
}

// Matches reports whether the rule is for host:port.
func (in Inject) Matches(host string, port int) bool {
	return in.Port == port && in.Host == allowlist.Normalize(host)
}

// injectsFor is the rules of g for host:port.
func (g Grant) injectsFor(host string, port int) []Inject {
	var out []Inject
	for _, in := range g.Inject {
		if in.Matches(host, port) {
			out = append(out, in)
		}
	}
	return out
}

// Limits of an intercepted connection.
const (
	interceptHandshakeTimeout = 10 * time.Second
	interceptHeaderTimeout    = 60 * time.Second
	interceptIdleTimeout      = 5 * time.Minute
	interceptMaxHeaderBytes   = 1 << 20
)

// intercept serves a CONNECT to a host with inject rules: the proxy is the
// TLS server (a leaf of the org's CA), reads each HTTP/1.1 request, sets
// the rules' headers and sends it on over its own TLS connection to the
// real host, verified against UpstreamRoots (or the system's).
func (p *Proxy) intercept(w http.ResponseWriter, id, target, host string, port int, g Grant, rules []Inject) {
	ctx := context.Background()
	if g.Leaf == nil {
		err := errors.New("the hub has no certificate authority for this org")
		p.o.Record(ctx, Event{Sandbox: id, Target: target, Allowed: true, Err: err})
		refuse(w, http.StatusBadGateway, "cannot broker "+target+": "+err.Error())
		return
	}
	leaf, err := g.Leaf(host)
	if err != nil {
		p.o.Record(ctx, Event{Sandbox: id, Target: target, Allowed: true, Err: err})
		refuse(w, http.StatusBadGateway, "cannot broker "+target+": "+err.Error())
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		refuse(w, http.StatusInternalServerError, "cannot take over the connection")
		return
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	if !p.track(c) {
		c.Close()
		return
	}
	defer p.untrack(c)
	names := make([]string, 0, len(rules))
	for _, r := range rules {
		names = append(names, http.CanonicalHeaderKey(r.Header))
	}
	p.o.Record(ctx, Event{Sandbox: id, Target: target, Allowed: true, Brokered: names})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	tc := tls.Server(&bufferedConn{Conn: c, r: rw.Reader}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		// HTTP/1.1 only: every client offers it, and one request at a
		// time keeps the rewriting simple.
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, interceptHandshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		// Most often a client that does not trust the org's CA (or pins).
		p.log.Info("brokered connection: the sandbox's TLS handshake failed", zap.String("sandbox", id),
			zap.String("target", target), zap.Error(err))
		return
	}
	tr := p.upstream(host, port, g.AllowPrivate)
	defer tr.CloseIdleConnections()
	hostHeader := host
	if port != 443 {
		hostHeader = net.JoinHostPort(host, strconv.Itoa(port))
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Only ever the host the CONNECT named, whatever Host the
			// request says.
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "https", hostHeader, hostHeader
			for _, r := range rules {
				pr.Out.Header.Set(r.Header, string(r.Value))
			}
		},
		Transport:     tr,
		FlushInterval: -1, // streamed answers (server-sent events) as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			msg := err.Error()
			if errors.Is(err, ErrForbiddenAddress) {
				msg = "refused: " + msg
			}
			http.Error(w, "agentd egress proxy: "+target+": "+msg, http.StatusBadGateway)
		},
		ErrorLog: zap.NewStdLog(p.log.Named("broker")),
	}
	// A hijacked connection (a websocket upgrade) ends Serve while its
	// handler still copies: wait for the handlers before the connection
	// is closed.
	var active sync.WaitGroup
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Done()
		rp.ServeHTTP(w, r)
	})
	served := newOneConnListener(tc)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: interceptHeaderTimeout, IdleTimeout: interceptIdleTimeout,
		MaxHeaderBytes: interceptMaxHeaderBytes, ConnState: served.state,
		ErrorLog: zap.NewStdLog(p.log.Named("broker.http"))}
	_ = srv.Serve(served)
	active.Wait()
}

// upstream is the transport of one intercepted connection: it dials
// host:port through the proxy's dialer (the address checks hold) and
// verifies the host's certificate.
func (p *Proxy) upstream(host string, port int, allow PrivateAllow) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(WithPrivateAllow(ctx, allow), p.o.DialTimeout)
			defer cancel()
			return p.o.Dial(ctx, allowlist.Normalize(host), port)
		},
		TLSClientConfig: &tls.Config{
			RootCAs:    p.o.UpstreamRoots,
			ServerName: strings.Trim(host, "[]"),
			NextProtos: []string{"http/1.1"},
			MinVersion: tls.VersionTLS12,
		},
		ForceAttemptHTTP2:   false,
		TLSHandshakeTimeout: p.o.DialTimeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
	}
}

// bufferedConn reads what the CONNECT's reader already holds first.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConnListener hands an http.Server one connection, then answers
// Accept with an error once that connection is closed (or hijacked, as a
// websocket upgrade does), which ends Serve.
type oneConnListener struct {
	c    net.Conn
	took chan net.Conn
	done chan struct{}
	end  sync.Once
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{c: c, took: make(chan net.Conn, 1), done: make(chan struct{})}
	l.took <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.took:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) state(_ net.Conn, s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		l.end.Do(func() { close(l.done) })
	}
}

func (l *oneConnListener) Close() error   { l.end.Do(func() { close(l.done) }); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// SystemRootsNote says where upstream certificates are verified against
// when UpstreamRoots is nil, for messages and docs.
const SystemRootsNote = "the system's roots (SSL_CERT_FILE and SSL_CERT_DIR are honoured)"
