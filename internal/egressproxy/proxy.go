package egressproxy

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/allowlist"
)

// ErrUnknownSandbox is what a Lookup returns for an id that is no live
// sandbox (or one without an allow list).
var ErrUnknownSandbox = errors.New("unknown sandbox")

// Grant is what the hub knows of a sandbox that asks to connect.
type Grant struct {
	// Key is the sandbox's public key, which signs its requests.
	Key ed25519.PublicKey
	// Allow is its allow list; empty: nothing is allowed.
	Allow allowlist.List
	// Gen is the allow list's generation: 1 as the sandbox was made, one
	// more with each change (0: a list that never changes).
	Gen int64
	// CutGen is the generation of the latest change that cut existing
	// connections: a tunnel opened under an earlier generation to a
	// destination Allow no longer matches is closed (0: none).
	CutGen int64
	// Inject are the headers the hub sets for the sandbox (see
	// intercept.go): a CONNECT to a host:port with a rule is intercepted,
	// every other one stays a plain tunnel.
	Inject []Inject
	// Leaf mints the certificate the proxy shows the sandbox for a host
	// it intercepts (the org CA's). Needed only with Inject.
	Leaf func(host string) (*tls.Certificate, error)
	// AllowPrivate are private destinations this sandbox may reach besides
	// the dialer's own (its environment's).
	AllowPrivate PrivateAllow
}

// Event is one connection asked for, allowed or refused, for the org's
// activity.
type Event struct {
	Sandbox string
	Target  string // host:port as asked
	Allowed bool   // the allow list and the address checks let it through
	// Err is why it was refused, or (Allowed) why the connection failed;
	// nil for a connection made.
	Err error
	// Brokered names the headers the hub sets on this connection's
	// requests (an intercepted one); empty for a plain tunnel.
	Brokered []string
}

// ProxyOptions configures a Proxy. Zero fields get the defaults documented
// on them.
type ProxyOptions struct {
	// Lookup returns the grant of a sandbox id. Required.
	Lookup func(ctx context.Context, id string) (Grant, error)
	// Dial connects to an allowed destination. Default: a PublicDialer's
	// Dial (public addresses only).
	Dial func(ctx context.Context, host string, port int) (net.Conn, error)
	// Record receives every authenticated request's outcome. Default: none.
	Record func(ctx context.Context, ev Event)
	// Logger receives refusals of unauthenticated requests and failures.
	// Default: a no-op logger.
	Logger *zap.Logger
	// Now is the clock the requests' times are checked against. Default
	// time.Now.
	Now func() time.Time
	// DialTimeout bounds resolving and dialing one destination. Default
	// 10 s.
	DialTimeout time.Duration
	// RecheckEvery is how often the open tunnels' sandboxes are looked up
	// again, to close those a cutting change of the allow list no longer
	// allows (a change made on another hub replica). Default 500 ms;
	// negative: never (Recheck alone).
	RecheckEvery time.Duration
	// UpstreamRoots verify the real hosts of intercepted connections.
	// Default nil: the system's roots (SSL_CERT_FILE and SSL_CERT_DIR are
	// honoured, as Go does on Linux).
	UpstreamRoots *x509.CertPool
}

// Proxy is the hub's end: an http.Handler for CONNECT requests on the
// hub's sandbox socket. Close ends every spliced connection.
type Proxy struct {
	o   ProxyOptions
	log *zap.Logger

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup

	tunnels map[*tunnel]struct{} // open tunnels, by sandbox and destination (live.go)
	stop    chan struct{}        // closed by Close: ends the recheck loop
	loop    sync.WaitGroup
}

var _ http.Handler = (*Proxy)(nil)

// NewProxy checks o and fills its defaults.
func NewProxy(o ProxyOptions) (*Proxy, error) {
	if o.Lookup == nil {
		return nil, errors.New("egressproxy: no Lookup")
	}
	if o.Dial == nil {
		o.Dial = (&PublicDialer{}).Dial
	}
	if o.Record == nil {
		o.Record = func(context.Context, Event) {}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.RecheckEvery == 0 {
		o.RecheckEvery = 500 * time.Millisecond
	}
	p := &Proxy{o: o, log: o.Logger.Named("egress"), conns: map[net.Conn]struct{}{},
		tunnels: map[*tunnel]struct{}{}, stop: make(chan struct{})}
	if o.RecheckEvery > 0 {
		p.loop.Add(1)
		go p.recheckLoop()
	}
	return p, nil
}

// refuse answers a request that gets no connection.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	fmt.Fprintln(w, "agentd egress proxy: "+msg)
}

// ServeHTTP handles one CONNECT: authenticate, check, dial, splice.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		refuse(w, http.StatusMethodNotAllowed, "only CONNECT host:port")
		return
	}
	if !p.enter() {
		refuse(w, http.StatusServiceUnavailable, "the hub is shutting down")
		return
	}
	defer p.wg.Done()
	target := r.Host
	host, port, err := splitTarget(target)
	if err != nil {
		refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	id := r.Header.Get(HeaderSandbox)
	g, err := p.o.Lookup(r.Context(), id)
	if err != nil && !errors.Is(err, ErrUnknownSandbox) {
		p.log.Warn("could not look up a sandbox for egress", zap.String("sandbox", truncate(id)), zap.Error(err))
		refuse(w, http.StatusServiceUnavailable, "the hub could not check this sandbox just now; try again")
		return
	}
	if err == nil {
		err = verify(r.Header, target, p.o.Now(), g.Key)
	}
	if err != nil {
		p.log.Warn("refused an unauthenticated egress request", zap.String("sandbox", truncate(id)), zap.String("target", truncate(target)), zap.Error(err))
		refuse(w, http.StatusForbidden, "the request does not prove a sandbox of this hub")
		return
	}
	ctx := context.WithoutCancel(r.Context())
	if !g.Allow.Match(host, port) {
		err := &DeniedError{Target: target, Allow: g.Allow}
		p.o.Record(ctx, Event{Sandbox: id, Target: target, Err: err})
		refuse(w, http.StatusForbidden, err.Error()+"; "+DeniedHint)
		return
	}
	if rules := g.injectsFor(host, port); len(rules) > 0 {
		p.intercept(w, id, target, host, port, g, rules)
		return
	}
	dctx, cancel := context.WithTimeout(WithPrivateAllow(r.Context(), g.AllowPrivate), p.o.DialTimeout)
	up, err := p.o.Dial(dctx, allowlist.Normalize(host), port)
	cancel()
	if err != nil {
		forbidden := errors.Is(err, ErrForbiddenAddress)
		p.o.Record(ctx, Event{Sandbox: id, Target: target, Allowed: !forbidden, Err: err})
		if forbidden {
			refuse(w, http.StatusForbidden, err.Error())
		} else {
			refuse(w, http.StatusBadGateway, fmt.Sprintf("could not reach %s: %v", target, err))
		}
		return
	}
	p.o.Record(ctx, Event{Sandbox: id, Target: target, Allowed: true})
	p.splice(w, up, &tunnel{sandbox: id, host: host, port: port, gen: g.Gen})
}

// splice hijacks the client's connection, answers 200 and copies bytes
// both ways until both sides are done (or Close).
func (p *Proxy) splice(w http.ResponseWriter, up net.Conn, tn *tunnel) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		refuse(w, http.StatusInternalServerError, "cannot take over the connection")
		return
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	if !p.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	defer p.untrack(c, up)
	tn.conns = [2]net.Conn{c, up}
	p.open(tn)
	defer p.shut(tn)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	Splice(c, rw.Reader, up, up)
}

// enter counts a request in, unless the proxy is closed.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
	p.mu.Unlock()
}

// Close ends every spliced connection and waits for the requests in
// flight; later requests are refused. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		close(p.stop)
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.loop.Wait()
	return nil
}

// DeniedHint ends the body of a refusal for a destination off the list:
// what a person can do about it.
const DeniedHint = "an admin adds destinations with 'agentctl sandbox allow SANDBOX HOST[:PORT]', a run with 'agentctl agent run PROFILE --allow HOST[:PORT]'"

// DeniedError is a destination that is not on the sandbox's allow list.
type DeniedError struct {
	Target string
	Allow  allowlist.List
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s is not on this sandbox's allow list (%s)", e.Target, strings.Join(e.Allow.Strings(), ", "))
}

// splitTarget reads a CONNECT target: host:port, port 1 to 65535.
func splitTarget(target string) (string, int, error) {
	host, ps, err := net.SplitHostPort(target)
	if err != nil {
		return "", 0, fmt.Errorf("CONNECT %q: want host:port", truncate(target))
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("CONNECT %q: want host:port with a port from 1 to 65535", truncate(target))
	}
	return host, port, nil
}

// Splice copies a's reads (ar, which may hold bytes already buffered from
// a) to b and b's (br) to a, passing on each side's end of data as a half
// close, until both directions are done; an error in either direction
// closes both connections.
func Splice(a net.Conn, ar io.Reader, b net.Conn, br io.Reader) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(b, ar, a)
	}()
	pipe(a, br, b)
	<-done
}

// pipe copies r to dst, then half-closes dst; on an error it closes both
// dst and src, which ends the other direction too.
func pipe(dst net.Conn, r io.Reader, src net.Conn) {
	_, err := io.Copy(dst, r)
	if err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
}

func truncate(s string) string {
	if len(s) <= 100 {
		return s
	}
	return s[:100] + "…"
}
