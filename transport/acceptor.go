package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
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

	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// AcceptorOptions configures an Acceptor. Zero fields get defaults in
// NewAcceptor.
type AcceptorOptions struct {
	// Authenticate looks a machine up: its public key and its org's name.
	// For an unknown machine it returns ErrUnknownMachine; for an id this
	// acceptor never takes, ErrWrongEndpoint wrapped in the explanation the
	// daemon is sent (checked before any key); for a revoked one
	// its key, its org and ErrRevoked (the daemon is told the org only after
	// it has proven it holds the key). Any other error refuses the tunnel as
	// "unavailable" and the daemon retries with backoff. Required.
	Authenticate func(ctx context.Context, machineID string) (pub ed25519.PublicKey, org string, err error)
	// OnTunnel receives each authenticated tunnel. The conn belongs to it
	// from then on and must be closed by it (Registry.Add does that when the
	// tunnel is replaced, revoked or broken). remote is the peer's address.
	// Required.
	OnTunnel func(machineID string, conn net.Conn, remote string)
	// Host is the hub's public host[:port] (or its public URL), the host
	// daemons dial and sign for. Default: the Host header of each request.
	Host string
	// NonceTTL is how long a challenge can be answered. Default 1 min.
	NonceTTL time.Duration
	// HandshakeTimeout drops a daemon that has not finished the challenge in
	// this time. Default 10 s.
	HandshakeTimeout time.Duration
	// RecheckInterval paces the re-check of a connected machine: each time
	// its daemon pings (every 15 s), if this long has passed since the last
	// check, Authenticate runs again and a machine that is now revoked,
	// unknown or paired with another key loses its tunnel. Default 0: on
	// every ping.
	RecheckInterval time.Duration
	// RefusalLogInterval paces the logs of refused handshakes, which anyone
	// who can reach the hub can cause: in each interval the first refusal
	// from an address is logged (for up to 10 addresses), then at most one
	// summary line counts the rest by reason. Every refusal is counted in
	// Refused. Default 1 min.
	RefusalLogInterval time.Duration
	// Clock decides when nonces expire and paces the refusal logs.
	// Default: the system clock.
	Clock Clock
	// Logger receives the acceptor's logs, which NewAcceptor names
	// "tunnel" under it. Default: a no-op logger.
	Logger *zap.Logger
}

// Acceptor is the hub's end of the tunnel: the http.Handler for GET
// /v1/tunnel. It challenges the daemon, checks its answer and hands the
// authenticated tunnel to OnTunnel. It keeps track of the tunnels it handed
// out (no goroutine per tunnel), so Close can end them all.
type Acceptor struct {
	opts   AcceptorOptions
	log    *zap.Logger
	host   string
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	live   map[*conn]struct{} // tunnels handed out and not ended
	wg     sync.WaitGroup     // handshakes in flight, refusal-log timers

	refused *refusals
}

var _ http.Handler = (*Acceptor)(nil)

// NewAcceptor checks opts, fills defaults and returns the Acceptor.
func NewAcceptor(opts AcceptorOptions) (*Acceptor, error) {
	if opts.Authenticate == nil || opts.OnTunnel == nil {
		return nil, errors.New("tunnel acceptor: Authenticate and OnTunnel are required")
	}
	host := ""
	if opts.Host != "" {
		h := opts.Host
		if strings.Contains(h, "://") { // a URL: its host
			u, err := url.Parse(h)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("tunnel acceptor: host %q: want host[:port] or a URL", h)
			}
			h = u.Host
		}
		host = canonicalHost(h)
	}
	if opts.NonceTTL <= 0 {
		opts.NonceTTL = time.Minute
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.RefusalLogInterval <= 0 {
		opts.RefusalLogInterval = time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Acceptor{
		opts:   opts,
		log:    opts.Logger.Named("tunnel"),
		host:   host,
		ctx:    ctx,
		cancel: cancel,
		live:   make(map[*conn]struct{}),
	}
	// A refusal is recorded inside a handshake, which holds a.wg: adding
	// the timer to it cannot race with Close's Wait.
	a.refused = &refusals{log: a.log, clock: opts.Clock, interval: opts.RefusalLogInterval, done: ctx.Done(), goFn: a.wg.Go}
	return a, nil
}

// Refused counts the tunnel handshakes refused since the Acceptor was made,
// by reason: every Reason of a verdict, then "timeout" (no answer to the
// challenge in HandshakeTimeout) and "disconnected" (the connection broke
// mid-handshake). Every reason is listed, in a fixed order, counted or not.
func (a *Acceptor) Refused() []RefusalCount { return a.refused.counted() }

// ServeHTTP upgrades the request to a websocket, runs the challenge and,
// once the daemon is authenticated, hands the tunnel to OnTunnel.
func (a *Acceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "the tunnel is opened with GET", http.StatusMethodNotAllowed)
		return
	}
	id := r.Header.Get(HeaderMachine)
	if !ValidMachineID(id) {
		http.Error(w, "missing or malformed "+HeaderMachine+" header: the daemon's machine id", http.StatusBadRequest)
		return
	}
	if !offersSubprotocol(r) {
		http.Error(w, "the tunnel needs the websocket subprotocol "+Subprotocol, http.StatusBadRequest)
		return
	}
	if !a.enter() {
		http.Error(w, "the hub is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer a.wg.Done()

	// (Hijacking clears the server's read and write deadlines; the
	// handshake has its own.)
	hb := &heartbeat{a: a, id: id}
	ws, err := websocket.Accept(leanHijacker{w}, r, &websocket.AcceptOptions{
		Subprotocols:   []string{Subprotocol},
		OnPingReceived: hb.onPing,
	})
	if err != nil {
		a.log.Debug("websocket upgrade failed", zap.String("remote", r.RemoteAddr), zap.Error(err))
		return // Accept has answered
	}
	host := a.host
	if host == "" {
		host = canonicalHost(r.Host)
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.opts.HandshakeTimeout)
	c, pub, err := a.handshake(ctx, ws, id, host)
	if err != nil {
		a.refuse(ctx, ws, id, r.RemoteAddr, err)
		cancel()
		return
	}
	cancel()
	// Fields rather than a logger With them: an idle tunnel keeps this.
	machine, remote := zap.String("machine", id), zap.String("remote", r.RemoteAddr)
	start := time.Now()
	c.onEnd = func() {
		a.mu.Lock()
		delete(a.live, c)
		a.mu.Unlock()
		a.log.Info("tunnel down", machine, remote, zap.Duration("up", time.Since(start)), zap.NamedError("cause", c.cause()))
	}
	a.mu.Lock()
	closed := a.closed
	if !closed {
		a.live[c] = struct{}{}
	}
	a.mu.Unlock()
	if closed {
		c.closeWith(websocket.StatusGoingAway, "hub shutting down")
		return
	}
	a.log.Info("tunnel up", machine, remote)
	hb.pub = pub
	hb.last.Store(a.opts.Clock.Now().UnixNano())
	hb.conn.Store(c)
	a.opts.OnTunnel(id, c, r.RemoteAddr)
}

// handshake challenges the daemon and checks its answer. It returns the
// authenticated tunnel, or a *RejectedError (the verdict, not yet sent) or
// a *handshakeError (no verdict) and leaves the websocket to refuse.
func (a *Acceptor) handshake(ctx context.Context, ws *websocket.Conn, id, host string) (*conn, ed25519.PublicKey, error) {
	ws.SetReadLimit(maxHandshakeMessage)

	var raw [nonceBytes]byte
	rand.Read(raw[:]) // never fails (it crashes the program instead)
	nonce := base64.RawURLEncoding.EncodeToString(raw[:])
	expires := a.opts.Clock.Now().Add(a.opts.NonceTTL)
	if err := writeMessage(ctx, ws, message{Type: msgChallenge, Nonce: nonce, Expires: expires}); err != nil {
		return nil, nil, a.failed(ctx, fmt.Errorf("send challenge: %w", err))
	}
	typ, data, err := ws.Read(ctx)
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig):
		return nil, nil, &handshakeError{reason: string(ReasonBadRequest), err: fmt.Errorf("read the challenge response: %w", err)}
	case err != nil:
		return nil, nil, a.failed(ctx, fmt.Errorf("read the challenge response: %w", err))
	}

	reject := func(reason Reason, org, msg string) error {
		return &RejectedError{Reason: reason, Org: org, MachineID: id, Message: msg}
	}
	if typ != websocket.MessageText {
		return nil, nil, reject(ReasonBadRequest, "", "the challenge response must be a text message")
	}
	m, err := decodeMessage(data, msgResponse)
	if err != nil {
		return nil, nil, reject(ReasonBadRequest, "", clean(err.Error(), 200))
	}
	// Each connection gets its own nonce and reads one answer: an answer
	// naming any other nonce is a replay.
	if m.Nonce != nonce {
		return nil, nil, reject(ReasonReplayed, "", "the response answers another challenge; every nonce is good for one answer")
	}
	if a.opts.Clock.Now().After(expires) {
		return nil, nil, reject(ReasonExpired, "", "the response came after the challenge expired")
	}
	if canonicalHost(m.Host) != host {
		return nil, nil, reject(ReasonWrongHost, "", fmt.Sprintf("the daemon dialled %q but this hub is %q; pair with the hub's public URL", clean(m.Host, 100), host))
	}

	pub, org, err := a.opts.Authenticate(ctx, id)
	revoked := errors.Is(err, ErrRevoked)
	switch {
	case errors.Is(err, ErrWrongEndpoint):
		return nil, nil, reject(ReasonWrongEndpoint, "", clean(err.Error(), 200))
	case errors.Is(err, ErrUnknownMachine):
		return nil, nil, reject(ReasonUnknownMachine, "", "no machine with this id is paired with this hub")
	case err != nil && !revoked:
		a.log.Error("cannot look up a machine", zap.String("machine", id), zap.Error(err))
		return nil, nil, reject(ReasonUnavailable, "", "the hub cannot check machines right now")
	case len(pub) != ed25519.PublicKeySize && revoked:
		return nil, nil, reject(ReasonRevoked, "", "this machine was removed from its org")
	case len(pub) != ed25519.PublicKeySize:
		a.log.Error("stored public key is not Ed25519", zap.String("machine", id), zap.Int("bytes", len(pub)))
		return nil, nil, reject(ReasonUnavailable, "", "the hub has no usable key for this machine")
	}
	if !ed25519.Verify(pub, signedMessage(host, id, nonce), m.Signature) {
		return nil, nil, reject(ReasonBadSignature, "", "the signature does not match this machine's key")
	}
	if revoked {
		return nil, nil, reject(ReasonRevoked, org, "this machine was removed from org "+org)
	}
	if err := writeMessage(ctx, ws, message{Type: msgOK}); err != nil {
		return nil, nil, a.failed(ctx, fmt.Errorf("send verdict: %w", err))
	}
	return newConn(ws, websocket.StatusGoingAway, "hub closed the tunnel"), pub, nil
}

// handshakeError is a handshake that ended without a verdict.
type handshakeError struct {
	reason string // a refusal reason; "" when the hub is shutting down
	err    error
}

func (e *handshakeError) Error() string { return e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// failed says why a handshake's read or write failed: the daemon too slow,
// the hub closing, or the connection broken.
func (a *Acceptor) failed(ctx context.Context, err error) *handshakeError {
	switch {
	case a.ctx.Err() != nil:
		return &handshakeError{err: err}
	case ctx.Err() != nil:
		return &handshakeError{reason: refusedTimeout, err: fmt.Errorf("no answer to the challenge within %s", a.opts.HandshakeTimeout)}
	}
	return &handshakeError{reason: refusedDisconnected, err: err}
}

// refuse counts and logs (sampled) a failed handshake, then tells the
// daemon: the verdict and a policy-violation close, or just the close.
// Counting comes first, so a daemon that has read its verdict knows it
// was counted.
func (a *Acceptor) refuse(ctx context.Context, ws *websocket.Conn, id, remote string, err error) {
	var rej *RejectedError
	if errors.As(err, &rej) {
		a.refused.record(string(rej.Reason), id, remote, nil)
		if werr := writeMessage(ctx, ws, message{Type: msgRejected, Reason: rej.Reason, Org: rej.Org, Message: rej.Message}); werr != nil {
			ws.CloseNow()
			return
		}
		ws.Close(websocket.StatusPolicyViolation, string(rej.Reason))
		return
	}
	var he *handshakeError
	if !errors.As(err, &he) || he.reason == "" { // the hub is shutting down
		a.log.Debug("tunnel handshake ended", zap.String("machine", id), zap.String("remote", remote), zap.Error(err))
		ws.CloseNow()
		return
	}
	a.refused.record(he.reason, id, remote, err)
	if errors.Is(err, websocket.ErrMessageTooBig) {
		// The library has sent the close status; a proper close lets the
		// daemon read it (bounded by the library's 5 s timeouts).
		ws.Close(websocket.StatusMessageTooBig, "handshake message too big")
		return
	}
	ws.CloseNow()
}

// enter registers a handler unless the acceptor is closed.
func (a *Acceptor) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.wg.Add(1)
	return true
}

// Close refuses new tunnels, ends handshakes in progress, closes every
// tunnel this acceptor handed out (status going-away, so daemons reconnect)
// and waits until all of that is done.
func (a *Acceptor) Close() error {
	a.mu.Lock()
	a.closed = true
	live := make([]*conn, 0, len(a.live))
	for c := range a.live {
		live = append(live, c)
	}
	a.mu.Unlock()
	a.cancel()
	for _, c := range live {
		a.wg.Go(func() { c.closeWith(websocket.StatusGoingAway, "hub shutting down") })
	}
	a.wg.Wait()
	return nil
}

func offersSubprotocol(r *http.Request) bool {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(p) == Subprotocol {
				return true
			}
		}
	}
	return false
}

// leanHijacker gives the websocket 1 KiB buffers instead of net/http's 4 KiB
// ones: an idle tunnel keeps them all its life. Large reads and writes
// bypass the buffers anyway.
type leanHijacker struct{ http.ResponseWriter }

func (l leanHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(l.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		c.Close()
		return nil, nil, err
	}
	var r io.Reader = c
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		r = io.MultiReader(bytes.NewReader(bytes.Clone(b)), c)
	}
	// The websocket reads the conn returned here (it resets the reader onto
	// it after the bytes buffered so far): reads go through burstConn,
	// large system calls while data flows.
	return newBurstConn(c), bufio.NewReadWriter(bufio.NewReaderSize(r, 1<<10), bufio.NewWriterSize(c, 1<<10)), nil
}

// heartbeat re-checks a connected machine when its daemon pings, so that a
// revoke recorded anywhere (another replica, the store) ends the tunnel.
type heartbeat struct {
	a    *Acceptor
	id   string
	pub  ed25519.PublicKey    // the key the tunnel was opened with
	conn atomic.Pointer[conn] // set once the tunnel is up
	busy atomic.Bool          // a check is running
	last atomic.Int64         // when the last check started (Clock, Unix ns)
}

// onPing runs inside the websocket's reader: it must not block.
func (h *heartbeat) onPing(context.Context, []byte) bool {
	c := h.conn.Load()
	if c == nil {
		return true
	}
	now := h.a.opts.Clock.Now().UnixNano()
	if now-h.last.Load() < int64(h.a.opts.RecheckInterval) || !h.busy.CompareAndSwap(false, true) {
		return true
	}
	if !h.a.enter() {
		h.busy.Store(false)
		return true
	}
	h.last.Store(now)
	go h.check(c)
	return true
}

func (h *heartbeat) check(c *conn) {
	defer h.a.wg.Done()
	defer h.busy.Store(false)
	ctx, cancel := context.WithTimeout(h.a.ctx, h.a.opts.HandshakeTimeout)
	defer cancel()
	pub, org, err := h.a.opts.Authenticate(ctx, h.id)
	var reason string
	switch {
	case errors.Is(err, ErrRevoked):
		reason = "machine revoked"
	case errors.Is(err, ErrUnknownMachine):
		reason = "machine unknown"
	case errors.Is(err, ErrWrongEndpoint):
		reason = "id not accepted on this endpoint"
	case err != nil:
		h.a.log.Warn("cannot re-check a machine; keeping its tunnel", zap.String("machine", h.id), zap.Error(err))
		return
	case !pub.Equal(h.pub):
		reason = "machine paired again with another key"
	default:
		return
	}
	h.a.log.Info("closing the tunnel of a machine that is no longer paired", zap.String("machine", h.id), zap.String("org", org), zap.String("reason", reason))
	c.closeWith(websocket.StatusPolicyViolation, reason)
}
