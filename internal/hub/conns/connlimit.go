package conns

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of the hub's caps per client address and per sandbox
// (hub.Options.MaxConnsPerClient and MaxConnsPerSandbox).
const (
	DefaultMaxConnsPerClient  = 512
	DefaultMaxConnsPerSandbox = 256
)

// Bounds on what a client may send or hold before it is served, shared by
// every server on the hub's port and its sandboxes' socket.
const (
	// MaxHeaderBytes bounds a request's headers (HTTP/1.1) and a gRPC
	// call's metadata: tokens and metadata fit in 64 KiB, and the server
	// reads them before it checks the token (gRPC's default is 16 MB).
	MaxHeaderBytes = 64 << 10
	// IdleConnTimeout closes a connection that has no request (HTTP) or
	// no call (gRPC) in progress for this long; clients dial again.
	IdleConnTimeout = 5 * time.Minute
)

// KeyFunc tells the key a connection is counted under and whether that
// key is capped (false: counted in the total only, e.g. a trusted proxy).
type KeyFunc func(net.Conn) (key string, capped bool)

// Limiter counts open connections by key and in total, across every
// listener it limits, and how many it refused.
type Limiter struct {
	total int // 0: no total cap

	refused atomic.Int64

	mu  sync.Mutex
	n   map[string]int
	all int
}

// NewLimiter returns a Limiter that takes at most total connections at
// once (0 or negative: no total cap; the hub passes TotalCap()).
func NewLimiter(total int) *Limiter {
	return &Limiter{total: max(total, 0), n: map[string]int{}}
}

// Limit returns lis counting the connections it accepts in l under key's
// answer, capped per key at perKey (0 or negative: no cap). A connection
// over a cap is closed as it is accepted, and Accept goes on to the next.
func (l *Limiter) Limit(lis net.Listener, perKey int, key KeyFunc) net.Listener {
	return &limitListener{Listener: lis, limits: l, key: key, perKey: max(perKey, 0)}
}

// Refused is how many connections l closed at once, over a cap.
func (l *Limiter) Refused() int64 { return l.refused.Load() }

// acquire counts a connection of key; false (and nothing counted) if key
// already has perKey (0: no cap) or the hub its total.
func (l *Limiter) acquire(key string, perKey int) bool {
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

func (l *Limiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.n[key]--; l.n[key] <= 0 {
		delete(l.n, key)
	}
}

// wrap returns c counted under key until it is closed, or nil (c closed)
// if the limit refuses it.
func (l *Limiter) wrap(c net.Conn, key string, perKey int) net.Conn {
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

// TCPClientKey returns the KeyFunc of the hub's TCP port: a connection
// counts under its client's address (IPv6: its /64), capped unless that
// address is in trusted (a reverse proxy's).
func TCPClientKey(trusted []netip.Prefix) KeyFunc {
	return func(c net.Conn) (string, bool) { return tcpClientKey(c, trusted) }
}

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
	limits *Limiter
	key    KeyFunc
	perKey int
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
		l.limits.refused.Add(1)
	}
}
