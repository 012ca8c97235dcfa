package transport

import (
	"net"
	"sync"
	"syscall"
)

// burstConn reads a busy connection in large system calls without giving
// an idle one a large buffer.
//
// The hub reads each tunnel's HTTP/2 frames through the websocket's small
// bufio.Reader (1 KiB, so that thousands of idle tunnels stay cheap), and
// gRPC adds no read buffer of its own on the tunnel for the same reason: a
// 16 KiB data frame then costs a read(2) for its header and another for the
// rest. burstConn asks the kernel how much is waiting (FIONREAD) before a
// small read; when a burst is waiting it reads all of it at once into a
// buffer taken from a pool, serves the following reads from it, and gives
// it back when drained. A read that would wait for data never holds the
// buffer, so an idle tunnel pays nothing.
type burstConn struct {
	net.Conn
	raw syscall.RawConn

	buf  *[]byte // taken from burstPool while it holds unread bytes
	r, w int
}

const (
	// burstSize is the pooled buffer's size and the largest single read.
	burstSize = 256 << 10
	// burstMin is how much must be waiting for a buffered read: below it,
	// the caller's own buffer is read into directly.
	burstMin = 8 << 10
)

var burstPool = sync.Pool{New: func() any { b := make([]byte, burstSize); return &b }}

// newBurstConn wraps c if the platform can tell how much c has waiting;
// otherwise it returns c.
func newBurstConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok || !canPeekQueued {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &burstConn{Conn: c, raw: raw}
}

// Read is called by one goroutine at a time (the websocket's reader).
func (b *burstConn) Read(p []byte) (int, error) {
	if b.buf != nil {
		n := copy(p, (*b.buf)[b.r:b.w])
		b.r += n
		if b.r == b.w {
			burstPool.Put(b.buf)
			b.buf, b.r, b.w = nil, 0, 0
		}
		return n, nil
	}
	if len(p) >= burstSize {
		return b.Conn.Read(p)
	}
	if q := queued(b.raw); q < burstMin || q <= len(p) {
		return b.Conn.Read(p)
	}
	buf := burstPool.Get().(*[]byte)
	// Data is waiting: this read returns at once.
	n, err := b.Conn.Read(*buf)
	if n == 0 {
		burstPool.Put(buf)
		return 0, err
	}
	c := copy(p, (*buf)[:n])
	if c == n {
		burstPool.Put(buf)
	} else {
		b.buf, b.r, b.w = buf, c, n
	}
	// An error comes back with the next read, after the buffered bytes.
	return c, nil
}
