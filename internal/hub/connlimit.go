package hub

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/devdepot-ai/agentd/internal/wire"
)

// Every open connection holds a file descriptor; a hub out of them cannot
// accept, open its database nor dial Docker. So connections are counted
// as they are accepted and the excess is closed at once, before it is
// read from:
//
//   - per client: on the TCP port by remote address (a reverse proxy
//     named by TrustedProxies is not capped: it carries everyone), on the
//     sandboxes' unix socket by the peer's cgroup, i.e. its container
//     (SO_PEERCRED gives the pid of the process that connected; every
//     process of one container shares its cgroup, and a sandbox cannot
//     move itself out of it; a hub in a pid namespace of its own, which
//     cannot see its sandboxes' processes, counts them in the total only);
//   - in total, below the process's RLIMIT_NOFILE, so that a flood from
//     many clients still leaves descriptors for the hub's own work.

// Defaults of Options.MaxConnsPerClient and MaxConnsPerSandbox.
const (
	DefaultMaxConnsPerClient  = 512
	DefaultMaxConnsPerSandbox = 256
)

// connLimiter counts open connections by key and in total.
type connLimiter struct {
	total int // 0: no total cap

	mu  sync.Mutex
	n   map[string]int
	all int
}

func newConnLimiter(total int) *connLimiter {
	return &connLimiter{total: total, n: map[string]int{}}
}

// acquire counts a connection of key; false (and nothing counted) if key
// already has perKey (0: no cap) or the hub its total.
func (l *connLimiter) acquire(key string, perKey int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total > 0 && l.all >= l.total {
		return false
	}
	if perKey > 0 && l.n[key] >= perKey {
		return false
	}
	l.n[key]++
	l.all++
	return true
}

func (l *connLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.n[key]--; l.n[key] <= 0 {
		delete(l.n, key)
	}
}

// wrap returns c counted under key until it is closed, or nil (c closed)
// if the limit refuses it.
func (l *connLimiter) wrap(c net.Conn, key string, perKey int) net.Conn {
	if !l.acquire(key, perKey) {
		_ = c.Close()
		return nil
	}
	return &limitedConn{Conn: c, release: func() { l.release(key) }}
}

// limitedConn gives its slot back when it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// SyscallConn is the connection's own (see prefixConn.SyscallConn).
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// CloseWrite half-closes the connection, as its own does (the egress
// proxy and net/http half-close before they close).
func (c *limitedConn) CloseWrite() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.ErrUnsupported
	}
	return cw.CloseWrite()
}

// tcpClientKey is the key a TCP connection is counted under, and whether
// it is capped (not a trusted proxy's).
func tcpClientKey(c net.Conn, trusted []netip.Prefix) (string, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String(), true
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		// One client holds a /64 at least.
		p, _ := a.Prefix(64)
		return p.String(), !inAny(a, trusted)
	}
	return a.String(), !inAny(a, trusted)
}

// unknownPeer is the key of unix connections whose peer is gone before
// it could be asked (a process that connects and exits, handing the
// connection on): they share one cap.
const unknownPeer = "peer:unknown"

// unseenPeer is the key of unix connections whose peer is in a pid
// namespace the hub cannot see (a hub in a container of its own): every
// sandbox would look alike, so these are counted in the total only.
const unseenPeer = "peer:unseen"

// limitListener counts the connections it accepts by key; those over the
// limit are closed as they are accepted, and Accept goes on to the next.
type limitListener struct {
	net.Listener
	limits *connLimiter
	key    func(net.Conn) (key string, capped bool)
	perKey int
	// refused counts connections closed at once.
	refused func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, capped := l.key(c)
		per := l.perKey
		if !capped {
			per = 0
		}
		if lc := l.limits.wrap(c, key, per); lc != nil {
			return lc, nil
		}
		if l.refused != nil {
			l.refused()
		}
	}
}

// Bounds on what a client may send or hold before it is served.
const (
	// maxHeaderBytes bounds a request's headers (HTTP/1.1) and a gRPC
	// call's metadata: tokens and metadata fit in 64 KiB, and the server
	// reads them before it checks the token (gRPC's default is 16 MB).
	maxHeaderBytes = 64 << 10
	// idleConnTimeout closes a connection that has no request (HTTP) or
	// no call (gRPC) in progress for this long; clients dial again.
	idleConnTimeout = 5 * time.Minute
)

// limitConns counts lis's connections in the hub's limits, capped per key
// at perKey (negative: no cap).
func (s *Server) limitConns(lis net.Listener, perKey int, key func(net.Conn) (string, bool)) net.Listener {
	return &limitListener{Listener: lis, limits: s.conns, key: key, perKey: max(perKey, 0), refused: func() { s.connsRefused.Add(1) }}
}

// tokenGate refuses, as its headers arrive, a call whose API token is
// missing or not one the hub knows (health checks need none). The
// authenticator checks every call again in full; for a unary call that is
// only once the request message has come, and without the gate a client
// with no valid token could hold any number of calls open with their
// headers. The gate runs on the connection's reader, so a token it has
// admitted recently is admitted again from memory: the store is read only
// for a token not seen in the last tokenGateTTL (a revoked one is still
// refused by the authenticator).
type tokenGate struct {
	auth *authenticator
	now  func() time.Time

	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time // hash of the authorization values -> admitted until
}

func newTokenGate(auth *authenticator, now func() time.Time) *tokenGate {
	return &tokenGate{auth: auth, now: now, seen: map[[sha256.Size]byte]time.Time{}}
}

// tokenGateTTL is how long an admitted token passes the gate without a
// store read; tokenGateMax bounds how many are remembered.
const (
	tokenGateTTL = 30 * time.Second
	tokenGateMax = 10000
)

func (g *tokenGate) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if public(info.FullMethodName) {
		return ctx, nil
	}
	key := sha256.Sum256([]byte(strings.Join(info.Header.Get(wire.MDAuthorization), "\x00")))
	now := g.now()
	g.mu.Lock()
	until, ok := g.seen[key]
	g.mu.Unlock()
	if ok && now.Before(until) {
		return ctx, nil
	}
	actx, cancel := context.WithTimeout(metadata.NewIncomingContext(ctx, info.Header), 10*time.Second)
	defer cancel()
	if _, err := g.auth.authenticate(actx); err != nil {
		if status.Code(err) == codes.Unauthenticated {
			return ctx, err
		}
		return ctx, nil // the store failing: the authenticator answers for it
	}
	g.mu.Lock()
	if len(g.seen) >= tokenGateMax {
		clear(g.seen)
	}
	g.seen[key] = now.Add(tokenGateTTL)
	g.mu.Unlock()
	return ctx, nil
}

// admitHTTP is the gate for a gRPC call that net/http serves (a TLS
// client that offered http/1.1 too, see splitter): it answers a refused
// call itself, trailers-only as gRPC does, and returns false.
func (g *tokenGate) admitHTTP(w http.ResponseWriter, r *http.Request) bool {
	md := metadata.MD{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		md[wire.MDAuthorization] = v
	}
	_, err := g.tap(r.Context(), &tap.Info{FullMethodName: r.URL.Path, Header: md})
	if err == nil {
		return true
	}
	st := status.Convert(err)
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", strconv.Itoa(int(st.Code())))
	w.Header().Set("Grpc-Message", grpcMessageEncode(st.Message()))
	w.WriteHeader(http.StatusOK)
	return false
}

// grpcMessageEncode percent-encodes a grpc-message value: every byte
// outside printable ASCII, and '%'.
func grpcMessageEncode(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
