package conns

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// http2Preface is what every HTTP/2 client sends first (RFC 9113 §3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// ClassifyTimeout bounds how long a new connection may take to show what it
// speaks (its first bytes, or its TLS handshake); the hub's gRPC servers
// take it as their connection timeout too.
const ClassifyTimeout = 10 * time.Second

// Splitter accepts connections from a listener and hands each, whole, to
// one of two listeners it feeds: GRPC's for the native grpc.Server, HTTP's
// for net/http (see the package doc for how it tells them apart).
type Splitter struct {
	inner     net.Listener
	tlsConfig *tls.Config // nil: plaintext
	log       *zap.Logger

	grpc, http *chanListener

	wg        sync.WaitGroup
	closeOnce sync.Once
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
}

// NewSplitter returns a Splitter on inner, which it owns from now on. With
// tlsConfig set it terminates TLS (NextProtos default to h2 and
// http/1.1); nil: plaintext. Call Run to start accepting.
func NewSplitter(inner net.Listener, tlsConfig *tls.Config, log *zap.Logger) *Splitter {
	s := &Splitter{inner: inner, log: log}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if tlsConfig != nil {
		s.tlsConfig = tlsConfig.Clone()
		if len(s.tlsConfig.NextProtos) == 0 {
			s.tlsConfig.NextProtos = []string{"h2", "http/1.1"}
		}
	}
	s.grpc = newChanListener(inner.Addr(), s.ctx.Done())
	s.http = newChanListener(inner.Addr(), s.ctx.Done())
	return s
}

// GRPC is the listener of the connections for the native gRPC server.
func (s *Splitter) GRPC() net.Listener { return s.grpc }

// HTTP is the listener of the connections for net/http.
func (s *Splitter) HTTP() net.Listener { return s.http }

// Run accepts until the splitter is closed (nil) or the inner listener
// fails (that error; the splitter is closed then). Accept errors that pass
// (out of file descriptors, a connection aborted) are retried after a
// backoff of up to a second.
func (s *Splitter) Run() error {
	var delay time.Duration
	for {
		c, err := s.inner.Accept()
		if err != nil {
			select {
			case <-s.ctx.Done():
				return nil
			default:
			}
			if temporaryAccept(err) {
				// Out of file descriptors and the like: back off like net/http.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", zap.Error(err), zap.Duration("retry_in", delay))
				select {
				case <-time.After(delay):
				case <-s.ctx.Done():
					return nil
				}
				continue
			}
			s.Close()
			return err
		}
		delay = 0
		s.wg.Go(func() { s.classify(c) })
	}
}

func (s *Splitter) classify(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(ClassifyTimeout))
	// Closing the splitter ends a classification still waiting for bytes.
	stop := context.AfterFunc(s.ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	var (
		to   *chanListener
		conn net.Conn
	)
	if s.tlsConfig != nil {
		grpcOnly := false
		cfg := s.tlsConfig.Clone()
		cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			grpcOnly = slices.Contains(h.SupportedProtos, "h2") && !slices.Contains(h.SupportedProtos, "http/1.1")
			return nil, nil
		}
		tc := tls.Server(c, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), ClassifyTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.log.Debug("tls handshake", zap.Stringer("remote", c.RemoteAddr()), zap.Error(err))
			_ = c.Close()
			return
		}
		conn, to = tc, s.http
		if grpcOnly {
			to = s.grpc
		}
	} else {
		head, isH2, err := sniffPreface(c)
		if err != nil && len(head) == 0 {
			_ = c.Close()
			return
		}
		conn, to = &prefixConn{Conn: c, prefix: head}, s.http
		if isH2 {
			to = s.grpc
		}
	}
	if !stop() { // closing: the deadline was cut short
		_ = conn.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	if !to.deliver(conn) {
		_ = conn.Close()
	}
}

// sniffPreface reads from c until what it read either is the HTTP/2 client
// preface or cannot become it, and returns the bytes read.
func sniffPreface(c net.Conn) (head []byte, isH2 bool, err error) {
	buf := make([]byte, len(http2Preface))
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if !bytes.HasPrefix([]byte(http2Preface), buf[:n]) {
			return buf[:n], false, nil
		}
		if err != nil {
			return buf[:n], false, err
		}
	}
	return buf, true, nil
}

// Close stops accepting and closes the inner listener and both outputs;
// connections already handed out are their servers' to close.
func (s *Splitter) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		err = s.inner.Close()
	})
	return err
}

// temporaryAccept tells an accept error that passes (the process or the
// system out of file descriptors, a connection reset before it was
// accepted) from the listener's end.
func temporaryAccept(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// Wait waits for the connections being classified (call it after Close).
func (s *Splitter) Wait() { s.wg.Wait() }

// chanListener is a net.Listener fed by a Splitter.
type chanListener struct {
	addr      net.Addr
	conns     chan net.Conn
	done      <-chan struct{} // the splitter's
	closed    chan struct{}
	closeOnce sync.Once
}

func newChanListener(addr net.Addr, done <-chan struct{}) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: done, closed: make(chan struct{})}
}

// deliver hands c to the listener's Accept; false once either is closed.
func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close makes Accept return; the splitter's own listener stays open.
func (l *chanListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// prefixConn replays the bytes read while classifying before reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// SyscallConn is the underlying connection's, so that readers above (the
// tunnel's burst reads) can ask the kernel how much is waiting; the
// replayed prefix is not counted, which only makes them read less at once.
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// CloseWrite half-closes the underlying connection (a byte stream the hub
// relays half-closes its sides as each direction ends).
func (c *prefixConn) CloseWrite() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.ErrUnsupported
	}
	return cw.CloseWrite()
}
