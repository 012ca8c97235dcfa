package transport

import (
	"context"
	"net"
	"sync"
	"time"
)

// coalescingConn batches the daemon's writes to the hub into fewer, larger
// system calls.
//
// A websocket client must mask what it sends, and coder/websocket masks
// through a 4 KiB bufio.Writer, flushing it to the connection every 4 KiB:
// a 32 KiB gRPC write became eight write(2) calls, and the syscalls were
// the largest cost of stdout through the tunnel. Write here only appends to
// a buffer; a flusher goroutine writes out everything buffered as soon as
// it is idle. Nothing waits for more data to arrive, so latency is
// unchanged: bytes written while a write(2) is in flight go out together in
// the next one.
//
// A write error is returned by the next Write (as the kernel's socket
// buffer would). Close writes out what is buffered first, within
// closeFlushTimeout.
type coalescingConn struct {
	net.Conn

	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte // waiting to be written
	spare  []byte // the buffer being written, reused afterwards
	closed bool
	err    error // the first write error; every later Write returns it
	done   chan struct{}
}

const (
	// coalesceLimit is how much may wait to be written before Write blocks.
	coalesceLimit = 256 << 10
	// closeFlushTimeout bounds how long Close waits for buffered bytes.
	closeFlushTimeout = 5 * time.Second
)

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, done: make(chan struct{})}
	cc.cond.L = &cc.mu
	go cc.flush()
	return cc
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && !c.closed && len(c.buf) > 0 && len(c.buf)+len(p) > coalesceLimit {
		c.cond.Wait()
	}
	switch {
	case c.err != nil:
		return 0, c.err
	case c.closed:
		return 0, net.ErrClosed
	}
	c.buf = append(c.buf, p...)
	c.cond.Broadcast()
	return len(p), nil
}

// flush writes out the buffer until the conn is closed or a write fails.
func (c *coalescingConn) flush() {
	defer close(c.done)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.buf) == 0 && !c.closed && c.err == nil {
			c.cond.Wait()
		}
		if c.err != nil || len(c.buf) == 0 {
			return // failed, or closed with nothing left
		}
		data := c.buf
		c.buf = c.spare[:0]
		c.mu.Unlock()
		_, err := c.Conn.Write(data)
		c.mu.Lock()
		c.spare = data[:0]
		if err != nil && c.err == nil {
			c.err = err
		}
		c.cond.Broadcast()
	}
}

// Close writes out what is buffered (for at most closeFlushTimeout) and
// closes the connection.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	t := time.NewTimer(closeFlushTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	err := c.Conn.Close()
	<-c.done // closing ends a write that was stuck
	return err
}

// coalescingDialer dials with d and wraps the connection (see coalescingConn).
func coalescingDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newCoalescingConn(c), nil
	}
}
