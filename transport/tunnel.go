package transport

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/version"
)

// Options configures a Tunnel. Zero fields get defaults in Listen.
type Options struct {
	// HubURL is the hub to dial: wss://host[:port][/base] or https://… (the
	// same); ws:// or http:// only to a loopback host; unix:///path/hub.sock
	// for a hub's unix socket (a sandbox the hub runs: no network needed).
	// The tunnel path /v1/tunnel is appended unless the URL already ends
	// with it.
	HubURL string
	// MachineID is the id the hub gave this machine when it was paired.
	MachineID string
	// Key is the machine's private key; the hub holds its public half.
	Key ed25519.PrivateKey
	// RootCAs verifies the hub's certificate. Default: the system's roots.
	RootCAs *x509.CertPool
	// Proxy chooses the HTTP proxy for a request to the hub, like
	// http.Transport.Proxy; wss goes through it with CONNECT. Default:
	// http.ProxyFromEnvironment (HTTPS_PROXY, NO_PROXY …).
	Proxy func(*http.Request) (*url.URL, error)
	// UserAgent is sent with the upgrade request. Default "agentd/<version>".
	UserAgent string
	// Logger receives the tunnel's logs, which Listen names "tunnel" under
	// it (pass the daemon's logger, not one already named so). Default: a
	// no-op logger.
	Logger *zap.Logger
	// Backoff paces reconnects. Zero fields get defaults (1 s ×1.6 up to
	// 30 s, full jitter, reset after 60 s up; 5 min after a rejection).
	Backoff Backoff
	// PingInterval is the websocket ping period; a hub that has not answered
	// a ping within one more interval is taken for dead and the tunnel is
	// dropped. Default 15 s.
	PingInterval time.Duration
	// HandshakeTimeout bounds one attempt: dial, proxy, TLS, upgrade and
	// challenge. Default 30 s.
	HandshakeTimeout time.Duration
	// Clock tells the time and paces the backoff. Default: the system clock.
	Clock Clock
	// Rand returns a uniform random number in [0, n); it jitters the
	// backoff. Default: math/rand/v2.Int64N.
	Rand func(n int64) int64
}

// State is where a Tunnel is in its life.
type State string

// States of a Tunnel.
const (
	StateConnecting State = "connecting" // dialling the hub or answering its challenge
	StateConnected  State = "connected"  // the tunnel is up
	StateWaiting    State = "waiting"    // down; the next attempt is at Status.NextAttempt
	StateRejected   State = "rejected"   // the hub refused this machine; retrying slowly
	StateClosed     State = "closed"     // Close was called
)

// Status is a snapshot of a Tunnel's state, for `agentd status` and logs.
type Status struct {
	State     State
	Hub       string // the URL dialled
	MachineID string
	// Since is when State began.
	Since time.Time
	// ConnectedSince is when the current tunnel came up; zero unless connected.
	ConnectedSince time.Time
	// Err is why the last attempt failed or the last tunnel ended; nil while
	// connected. A *RejectedError (errors.Is ErrRevoked, …) when rejected.
	Err error
	// NextAttempt is when the next attempt starts (waiting or rejected).
	NextAttempt time.Time
	// Failures counts the attempts that failed since the tunnel was last up.
	Failures int
}

// Tunnel is the daemon's end of the tunnel: a net.Listener whose Accept
// dials the hub (with backoff), authenticates and returns the tunnel as a
// net.Conn, and whose next Accept waits for that conn to end and reconnects.
// Serve a grpc.Server on it. Accept is meant for one caller at a time; the
// conns it returns belong to the caller, and Close leaves a live one open
// (grpc.Server's Stop and GracefulStop close it, with a going-away status).
type Tunnel struct {
	opts   Options
	log    *zap.Logger
	clock  Clock
	url    string
	host   string // canonical host the daemon dials: what it signs
	client *http.Client
	header http.Header
	ctx    context.Context
	cancel context.CancelFunc

	acceptMu sync.Mutex // serialises Accept; guards the fields below
	cur      *conn      // the tunnel handed out last
	upSince  time.Time
	failures int           // backoff exponent
	pause    bool          // wait next before the next attempt
	next     time.Duration // the wait

	mu      sync.Mutex // guards status, changed
	status  Status
	changed chan struct{}

	// The transport's TLS configuration and unix socket, for DialHub.
	tlsConf *tls.Config
	sock    string
}

var _ net.Listener = (*Tunnel)(nil)

// Listen checks opts, fills defaults and returns the daemon's Tunnel. It
// does not dial: the first Accept does.
func Listen(opts Options) (*Tunnel, error) {
	u, err := tunnelURL(opts.HubURL)
	if err != nil {
		return nil, err
	}
	if !ValidMachineID(opts.MachineID) {
		return nil, fmt.Errorf("machine id %q: want 1 to %d characters from A-Z a-z 0-9 . _ -", truncate(opts.MachineID, 140), maxMachineID)
	}
	if len(opts.Key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("machine key: want an Ed25519 private key (%d bytes), got %d bytes", ed25519.PrivateKeySize, len(opts.Key))
	}
	if opts.Proxy == nil {
		opts.Proxy = http.ProxyFromEnvironment
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "agentd/" + version.Version
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	opts.Backoff = opts.Backoff.withDefaults()
	if opts.PingInterval <= 0 {
		opts.PingInterval = 15 * time.Second
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 30 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Int64N
	}

	dial := coalescingDialer(&net.Dialer{Timeout: opts.HandshakeTimeout, KeepAlive: 30 * time.Second})
	sock := unixSocket(opts.HubURL)
	if sock != "" {
		// Every request goes to the socket, whatever the URL's host says;
		// no proxy applies.
		unix := coalescingDialer(&net.Dialer{Timeout: opts.HandshakeTimeout})
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) { return unix(ctx, "unix", sock) }
		opts.Proxy = nil
	}
	tlsConf := &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
	tr := &http.Transport{
		Proxy:               opts.Proxy,
		DialContext:         dial,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: opts.HandshakeTimeout,
		// The upgrade needs HTTP/1.1; a failed attempt's connection is not kept.
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	header := http.Header{}
	header.Set(HeaderMachine, opts.MachineID)
	header.Set("User-Agent", opts.UserAgent)

	ctx, cancel := context.WithCancel(context.Background())
	t := &Tunnel{
		opts:   opts,
		log:    opts.Logger.Named("tunnel"),
		clock:  opts.Clock,
		url:    u.String(),
		host:   canonicalHost(u.Host),
		client: &http.Client{Transport: tr},
		header: header,
		ctx:    ctx,
		cancel: cancel,
	}
	t.tlsConf, t.sock = tlsConf, sock
	t.status = Status{State: StateConnecting, Hub: t.url, MachineID: opts.MachineID, Since: t.clock.Now()}
	t.changed = make(chan struct{})
	return t, nil
}

// Accept returns the next tunnel to the hub. It waits for the tunnel it
// returned last to end, then (re)connects, waiting between attempts as the
// backoff says, until one succeeds or the Tunnel is closed (net.ErrClosed).
func (t *Tunnel) Accept() (net.Conn, error) {
	t.acceptMu.Lock()
	defer t.acceptMu.Unlock()
	if t.cur != nil {
		select {
		case <-t.cur.done:
		case <-t.ctx.Done():
			return nil, net.ErrClosed
		}
		t.lost()
	}
	for {
		if t.pause {
			select {
			case <-t.clock.After(t.next):
			case <-t.ctx.Done():
				return nil, net.ErrClosed
			}
		}
		t.update(func(s *Status) {
			s.State = StateConnecting
			s.NextAttempt = time.Time{}
		})
		c, err := t.connect(t.ctx)
		if t.ctx.Err() != nil {
			if c != nil {
				c.Close()
			}
			return nil, net.ErrClosed
		}
		if err != nil {
			t.failed(err)
			continue
		}
		now := t.clock.Now()
		t.cur, t.upSince, t.pause = c, now, false
		t.update(func(s *Status) {
			s.State = StateConnected
			s.ConnectedSince = now
			s.Err = nil
			s.Failures = 0
		})
		t.log.Info("tunnel to the hub is up", zap.String("hub", t.url))
		return c, nil
	}
}

// peerStatusWait bounds how long lost waits for the read that carries the
// hub's close status after a write failed first.
const peerStatusWait = time.Second

// lost notes that the current tunnel ended and schedules the reconnect.
func (t *Tunnel) lost() {
	up := t.clock.Now().Sub(t.upSince)
	cause := t.cur.cause()
	peer := websocket.CloseStatus(cause)
	if peer == -1 && cause != net.ErrClosed { // not our own Close (a write on the closed conn wraps it)
		peer = t.cur.peerStatus(peerStatusWait)
	}
	if errors.Is(cause, io.EOF) {
		// A normal or going-away close from the hub.
		cause = errors.New("the hub closed the tunnel")
	}
	t.cur = nil
	if up >= t.opts.Backoff.ResetAfter {
		t.failures = 0
	}
	t.next = t.opts.Backoff.delay(t.failures, t.opts.Rand)
	if peer == websocket.StatusPolicyViolation {
		// The hub closed the tunnel because the machine is no longer
		// paired (revoked, unknown, another key): ask again at once. The
		// answer is a refusal with the reason, which the daemon acts on
		// (agentd stops what the org started) and which then paces the
		// retries.
		t.next = 0
	}
	t.failures++
	t.pause = true
	err := fmt.Errorf("tunnel lost after %s: %w", up.Round(time.Second), cause)
	t.update(func(s *Status) {
		s.State = StateWaiting
		s.ConnectedSince = time.Time{}
		s.Err = err
		s.NextAttempt = t.clock.Now().Add(t.next)
	})
	t.log.Warn("tunnel to the hub lost; reconnecting", zap.Duration("up", up), zap.Duration("retry_in", t.next), zap.Error(cause))
}

// failed schedules the next attempt after err: slowly when the hub refused
// the machine for good, else with the backoff.
func (t *Tunnel) failed(err error) {
	state := StateWaiting
	var rej *RejectedError
	if errors.As(err, &rej) && rej.Reason.permanent() {
		state = StateRejected
		t.next = t.opts.Backoff.rejectedDelay(t.opts.Rand)
	} else {
		t.next = t.opts.Backoff.delay(t.failures, t.opts.Rand)
		t.failures++
	}
	t.pause = true
	t.update(func(s *Status) {
		s.State = state
		s.Err = err
		s.NextAttempt = t.clock.Now().Add(t.next)
		s.Failures++
	})
	if state == StateRejected {
		// The message is the instruction: "this machine was removed from org X; run agentd pair again".
		t.log.Error(err.Error(), zap.String("hub", t.url), zap.String("reason", string(rej.Reason)), zap.Duration("retry_in", t.next))
		return
	}
	t.log.Warn("cannot open the tunnel to the hub", zap.String("hub", t.url), zap.Error(err), zap.Duration("retry_in", t.next))
}

// connect dials the hub and answers its challenge.
func (t *Tunnel) connect(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.HandshakeTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, t.url, &websocket.DialOptions{
		HTTPClient:   t.client,
		HTTPHeader:   t.header,
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(io.LimitReader(resp.Body, 1024))
			}
			return nil, fmt.Errorf("hub answered %s: %s", resp.Status, clean(string(body), 200))
		}
		return nil, fmt.Errorf("dial hub: %w", err)
	}
	if ws.Subprotocol() != Subprotocol {
		ws.Close(websocket.StatusPolicyViolation, "subprotocol "+Subprotocol+" required")
		return nil, fmt.Errorf("%s does not speak %s: is it an agentd hub?", t.url, Subprotocol)
	}
	ws.SetReadLimit(maxHandshakeMessage)

	ch, err := readMessage(ctx, ws, msgChallenge)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("read the hub's challenge: %w", err)
	}
	sig := ed25519.Sign(t.opts.Key, signedMessage(t.host, t.opts.MachineID, ch.Nonce))
	err = writeMessage(ctx, ws, message{Type: msgResponse, Nonce: ch.Nonce, Host: t.host, Signature: sig})
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("answer the hub's challenge: %w", err)
	}
	v, err := readMessage(ctx, ws, msgOK, msgRejected)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("read the hub's verdict: %w", err)
	}
	if v.Type == msgRejected {
		ws.Close(websocket.StatusNormalClosure, "")
		return nil, &RejectedError{
			Reason:    Reason(clean(string(v.Reason), 40)),
			Org:       clean(v.Org, 100),
			MachineID: t.opts.MachineID,
			Message:   clean(v.Message, 300),
		}
	}

	c := newConn(ws, websocket.StatusGoingAway, "agentd closed the tunnel")
	c.local = addr{"websocket", "agentd/" + t.opts.MachineID}
	c.remote = addr{"websocket", t.host}
	t.startPinger(c)
	return c, nil
}

// startPinger pings the hub every PingInterval and drops the tunnel when a
// ping goes unanswered; Close stops it and waits.
func (t *Tunnel) startPinger(c *conn) {
	stopped := make(chan struct{})
	c.stop = func() { <-stopped }
	go func() {
		defer close(stopped)
		tick := time.NewTicker(t.opts.PingInterval)
		defer tick.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), t.opts.PingInterval)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil {
				select {
				case <-c.done:
					return
				default:
				}
				err = fmt.Errorf("the hub did not answer a ping within %s: %w", t.opts.PingInterval, err)
				c.end(err)
				c.ws.CloseNow()
				return
			}
		}
	}()
}

// Close stops the Tunnel: a blocked Accept returns net.ErrClosed and no
// reconnect follows. A tunnel already handed out stays open until its owner
// closes it.
func (t *Tunnel) Close() error {
	t.cancel()
	t.update(func(s *Status) {
		s.State = StateClosed
		s.NextAttempt = time.Time{}
	})
	t.client.CloseIdleConnections()
	return nil
}

// Addr is the hub's tunnel URL.
func (t *Tunnel) Addr() net.Addr { return addr{"websocket", t.url} }

// Status returns the tunnel's current state.
func (t *Tunnel) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// Updated returns a channel that is closed at the next change of Status.
func (t *Tunnel) Updated() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// update changes the status (unless closed) and wakes Updated's waiters.
func (t *Tunnel) update(f func(*Status)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status.State == StateClosed {
		return
	}
	prev := t.status.State
	f(&t.status)
	if t.status.State != prev {
		t.status.Since = t.clock.Now()
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// tunnelURL turns a hub URL into the tunnel's websocket URL.
func tunnelURL(hub string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(hub))
	if err != nil {
		return nil, fmt.Errorf("hub URL: %w", err)
	}
	if u.Scheme == "unix" {
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("hub URL %q: want unix:///absolute/path/to/hub.sock", hub)
		}
		return &url.URL{Scheme: "ws", Host: UnixHost, Path: Path}, nil
	}
	switch u.Scheme {
	case "https", "wss":
		u.Scheme = "wss"
	case "http", "ws":
		u.Scheme = "ws"
	default:
		return nil, fmt.Errorf("hub URL %q: want wss:// or https:// (ws:// or http:// for a hub on this machine)", hub)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("hub URL %q has no host", hub)
	}
	if u.User != nil {
		return nil, fmt.Errorf("hub URL %q: credentials in the URL are not used; the machine key authenticates", u.Redacted())
	}
	if u.Scheme == "ws" && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("hub URL %q: plain ws:// (http://) is only allowed to a loopback hub; use wss:// (https://)", hub)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, Path) {
		u.Path += Path
	}
	u.RawPath, u.Fragment, u.RawFragment = "", "", ""
	return u, nil
}

// UnixHost is the host a daemon names (and signs for) when it dials its hub
// over a unix socket: the hub's socket acceptor expects exactly this one.
const UnixHost = "agenthub.unix"

// unixSocket returns the socket path of a unix:// hub URL, or "".
func unixSocket(hub string) string {
	u, err := url.Parse(strings.TrimSpace(hub))
	if err != nil || u.Scheme != "unix" {
		return ""
	}
	return u.Path
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// readMessage reads one handshake message, text, of one of the types want.
func readMessage(ctx context.Context, ws *websocket.Conn, want ...string) (message, error) {
	typ, data, err := ws.Read(ctx)
	if err != nil {
		return message{}, err
	}
	if typ != websocket.MessageText {
		return message{}, errors.New("got a binary message, want the text handshake")
	}
	return decodeMessage(data, want...)
}

func writeMessage(ctx context.Context, ws *websocket.Conn, m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, b)
}

// clean makes text from the network fit for a log line: printable, at most n bytes.
func clean(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	return truncate(strings.TrimSpace(s), n)
}
