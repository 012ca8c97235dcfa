package transport

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Byte streams: one forwarded TCP connection's bytes on a connection of
// its own between the daemon and the hub, instead of in gRPC messages
// inside the tunnel's HTTP/2 (package doc and docs/design.md say why).
// The hub offers one by putting a single-use token in the call that
// carries the connection; the daemon dials the hub with it (an HTTP/1.1
// upgrade of GET StreamPath, the token in HeaderStream); after the hub's
// 101 the connection carries the bytes as they are, both ways, and a
// half-close is a half-close.
const (
	// StreamPath is where the hub accepts byte streams.
	StreamPath = Path + "/stream"
	// HeaderStream carries the stream's token on the upgrade request.
	HeaderStream = "Agentd-Stream"
	// StreamUpgrade is the Upgrade protocol of a byte stream.
	StreamUpgrade = "agentd-stream"
)

// ErrStreamUnavailable says the daemon cannot open a byte stream to this
// hub (a proxy lies between them, or a hub URL it cannot reach directly):
// the caller carries the connection in messages instead.
var ErrStreamUnavailable = errors.New("byte stream unavailable")

// streamTokenBytes is the randomness of a stream token.
const streamTokenBytes = 16

// DialStream opens the byte stream of token to the hub: it returns once
// the hub has switched protocols, the connection then carries the bytes
// as they are. It dials the hub directly (TCP, or the hub's unix socket),
// with TLS for a wss:// hub; a hub reached through an HTTP proxy gets
// ErrStreamUnavailable.
func (t *Tunnel) DialStream(ctx context.Context, token string) (net.Conn, error) {
	u, err := url.Parse(t.url)
	if err != nil {
		return nil, err
	}
	d := StreamDialer{URL: u, Socket: unixSocket(t.opts.HubURL), RootCAs: t.opts.RootCAs, Proxy: t.opts.Proxy,
		MachineID: t.opts.MachineID, UserAgent: t.opts.UserAgent, Timeout: t.opts.HandshakeTimeout}
	return d.Dial(ctx, token)
}

// StreamDialer opens byte streams to a hub: a daemon's (Tunnel.DialStream)
// or a caller's (agentctl port forward).
type StreamDialer struct {
	// URL is the hub's: its host, and TLS for https:// or wss://.
	URL *url.URL
	// Socket, if set, is the hub's unix socket, dialled instead of URL's host.
	Socket string
	// RootCAs verify the hub's certificate (nil: the system's).
	RootCAs *x509.CertPool
	// Proxy, if set and naming a proxy for the hub, makes Dial return
	// ErrStreamUnavailable: byte streams go to the hub directly.
	Proxy func(*http.Request) (*url.URL, error)
	// MachineID is sent in HeaderMachine: a daemon's id, "" for a caller.
	MachineID string
	// UserAgent is the request's User-Agent.
	UserAgent string
	// Timeout bounds the dial and the TLS handshake (0: none beyond ctx).
	Timeout time.Duration
}

// Dial opens the byte stream of token: it returns once the hub has
// switched protocols.
func (d StreamDialer) Dial(ctx context.Context, token string) (net.Conn, error) {
	u := d.URL
	tlsOn := u.Scheme == "wss" || u.Scheme == "https"
	scheme := "http"
	if tlsOn {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+u.Host+StreamPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", StreamUpgrade)
	req.Header.Set(HeaderStream, token)
	if d.MachineID != "" {
		req.Header.Set(HeaderMachine, d.MachineID)
	}
	if d.UserAgent != "" {
		req.Header.Set("User-Agent", d.UserAgent)
	}

	var c net.Conn
	nd := net.Dialer{Timeout: d.Timeout}
	if d.Socket != "" {
		c, err = nd.DialContext(ctx, "unix", d.Socket)
	} else {
		if d.Proxy != nil {
			if p, perr := d.Proxy(req); perr != nil || p != nil {
				return nil, ErrStreamUnavailable
			}
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), map[bool]string{false: "80", true: "443"}[tlsOn])
		}
		c, err = nd.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, fmt.Errorf("dial hub for a byte stream: %w", err)
	}
	if tlsOn {
		tc := tls.Client(c, &tls.Config{RootCAs: d.RootCAs, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("byte stream TLS: %w", err)
		}
		c = tc
	}
	return upgradeStream(ctx, c, req)
}

// upgradeStream sends req on c and waits for the hub's 101.
func upgradeStream(ctx context.Context, c net.Conn, req *http.Request) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("byte stream request: %w", err)
	}
	br := bufio.NewReaderSize(c, 1024)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("byte stream response: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), StreamUpgrade) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.Close()
		return nil, fmt.Errorf("hub refused the byte stream: %s: %s", resp.Status, clean(string(body), 200))
	}
	if !stop() {
		c.Close()
		return nil, ctx.Err()
	}
	return withBuffered(c, br), nil
}

// withBuffered returns c, or c behind what br read ahead of it.
func withBuffered(c net.Conn, br *bufio.Reader) net.Conn {
	if br.Buffered() == 0 {
		return c
	}
	head, _ := br.Peek(br.Buffered())
	return &headConn{Conn: c, head: append([]byte(nil), head...)}
}

// headConn is a connection whose first bytes were read ahead.
type headConn struct {
	net.Conn
	head []byte
}

func (c *headConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection.
func (c *headConn) CloseWrite() error { return CloseWrite(c.Conn) }

// CloseWrite half-closes c if it can (TCP, unix, TLS), else closes it.
func CloseWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// Streams is the hub's side of byte streams: the offers of calls waiting
// for their daemon's stream, and the handler (of StreamPath) that hands
// each arriving stream to its offer. Its zero value is not usable: see
// NewStreams.
type Streams struct {
	mu     sync.Mutex
	offers map[string]*StreamOffer
	taken  atomic.Int64
}

// NewStreams returns an empty Streams.
func NewStreams() *Streams { return &Streams{offers: map[string]*StreamOffer{}} }

// StreamOffer is one call's offer of a byte stream to a machine's daemon.
type StreamOffer struct {
	s       *Streams
	token   string
	machine string
	ch      chan net.Conn // receives the stream, once
	done    bool          // taken or cancelled; guarded by s.mu
}

// Offer makes a single-use token for machineID's daemon, valid until
// taken or Cancel.
func (s *Streams) Offer(machineID string) *StreamOffer {
	b := make([]byte, streamTokenBytes)
	_, _ = rand.Read(b)
	o := &StreamOffer{s: s, token: base64.RawURLEncoding.EncodeToString(b), machine: machineID, ch: make(chan net.Conn, 1)}
	s.mu.Lock()
	s.offers[o.token] = o
	s.mu.Unlock()
	return o
}

// Token is what the daemon sends back in HeaderStream.
func (o *StreamOffer) Token() string { return o.token }

// Wait returns the stream once the daemon opened it, or ctx's error.
func (o *StreamOffer) Wait(ctx context.Context) (net.Conn, error) {
	select {
	case c := <-o.ch:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Cancel withdraws the offer; a stream that arrived and was not taken by
// Wait is closed.
func (o *StreamOffer) Cancel() {
	o.s.mu.Lock()
	delete(o.s.offers, o.token)
	o.done = true
	o.s.mu.Unlock()
	select {
	case c := <-o.ch:
		c.Close()
	default:
	}
}

// Taken is the number of byte streams handed to their offers so far.
func (s *Streams) Taken() int64 { return s.taken.Load() }

// Pending is the number of offers not yet taken nor cancelled.
func (s *Streams) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.offers)
}

// ServeHTTP accepts a daemon's byte stream: a GET StreamPath upgrade to
// StreamUpgrade naming a pending offer's token (and its machine); anything
// else is refused without taking the connection.
func (s *Streams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !strings.EqualFold(r.Header.Get("Upgrade"), StreamUpgrade) || r.ProtoMajor != 1 {
		http.Error(w, "want an HTTP/1.1 upgrade to "+StreamUpgrade, http.StatusBadRequest)
		return
	}
	token := r.Header.Get(HeaderStream)
	s.mu.Lock()
	o := s.offers[token]
	if o != nil && o.machine != r.Header.Get(HeaderMachine) {
		o = nil
	}
	if o != nil {
		delete(s.offers, token)
	}
	s.mu.Unlock()
	if o == nil {
		http.Error(w, "no such byte stream: the token is unknown, used or withdrawn", http.StatusNotFound)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		o.Cancel()
		http.Error(w, "this connection cannot carry a byte stream", http.StatusInternalServerError)
		return
	}
	_ = c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+StreamUpgrade+"\r\n\r\n"); err != nil {
		c.Close()
		o.Cancel()
		return
	}
	c = withBuffered(c, brw.Reader)
	s.mu.Lock()
	cancelled := o.done
	o.done = true
	if !cancelled {
		o.ch <- c
		s.taken.Add(1)
	}
	s.mu.Unlock()
	if cancelled {
		c.Close()
	}
}
