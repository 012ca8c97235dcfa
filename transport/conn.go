package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// conn is one authenticated tunnel: a websocket carrying binary messages,
// seen as a net.Conn. It fixes NetConn's reads, closes with a meaningful
// status and tells its owner when it is over.
type conn struct {
	net.Conn // websocket.NetConn (binary); read limit off
	ws       *websocket.Conn
	cancel   context.CancelFunc
	local    net.Addr // nil: the NetConn's
	remote   net.Addr // nil: the NetConn's

	code   websocket.StatusCode // sent by Close
	reason string

	endOnce   sync.Once
	done      chan struct{} // closed when the tunnel is over (closed or broken)
	mu        sync.Mutex
	err       error // why it ended, when it broke
	closeOnce sync.Once
	closeErr  error
	// peerClose is the close status the peer sent (0: none seen). Kept
	// apart from err: a write can fail on the closed connection before
	// the read that carries the peer's status returns.
	peerClose atomic.Int32
	readOnce  sync.Once
	readEnded chan struct{} // closed when a read has failed
	stop      func()        // stops and waits for helpers (the daemon's pinger)
	onEnd     func()        // called once when the tunnel ends; set before the conn is used
}

// newConn switches ws to binary messages and wraps it. Closing the conn sends
// code and reason to the peer.
func newConn(ws *websocket.Conn, code websocket.StatusCode, reason string) *conn {
	// The NetConn's lifetime is the conn's, not the caller's: cancel is
	// called by Close.
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		Conn:   websocket.NetConn(ctx, ws, websocket.MessageBinary),
		ws:     ws,
		cancel: cancel,
		code:   code,
		reason: reason,
		done:   make(chan struct{}),

		readEnded: make(chan struct{}),
	}
}

// Read reads from the tunnel. Any error other than io.EOF comes with no
// bytes: coder/websocket can return a partial payload that is still masked
// together with the error when the TCP connection drops mid-frame.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		if st := websocket.CloseStatus(err); st != -1 {
			c.peerClose.Store(int32(st))
		}
		c.readOnce.Do(func() {
			if c.readEnded != nil {
				close(c.readEnded)
			}
		})
		c.end(err)
		if err != io.EOF {
			return 0, err
		}
	}
	return n, err
}

// Write writes one binary message.
func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.end(err)
	}
	return n, err
}

// Close closes the websocket with the conn's status (the peer sees why at
// once) and stops the conn's helpers.
func (c *conn) Close() error { return c.closeWith(c.code, c.reason) }

// closeWith closes the websocket with the given status; only the first close
// counts.
func (c *conn) closeWith(code websocket.StatusCode, reason string) error {
	c.closeOnce.Do(func() {
		c.end(net.ErrClosed)
		err := c.ws.Close(code, reason)
		c.cancel()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = err
		}
		if c.stop != nil {
			c.stop()
		}
	})
	return c.closeErr
}

// end records why the tunnel is over (the first reason wins) and signals done.
func (c *conn) end(err error) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
		if c.onEnd != nil {
			c.onEnd()
		}
	})
}

// peerStatus is the close status the peer sent, or 0. When the tunnel
// ended by a failed write, it waits up to wait for the read that carries
// the peer's status (the peer's close frame closes the connection under the
// writer, and the reader returns it a moment later).
func (c *conn) peerStatus(wait time.Duration) websocket.StatusCode {
	if c.readEnded != nil {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-c.readEnded:
		case <-t.C:
		}
	}
	return websocket.StatusCode(c.peerClose.Load())
}

// cause is why the tunnel ended: net.ErrClosed after Close, else the error
// that broke it; nil while it is up.
func (c *conn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *conn) LocalAddr() net.Addr {
	if c.local != nil {
		return c.local
	}
	return c.Conn.LocalAddr()
}

func (c *conn) RemoteAddr() net.Addr {
	if c.remote != nil {
		return c.remote
	}
	return c.Conn.RemoteAddr()
}

// statusCloser is implemented by tunnel conns that can tell the peer why
// they close; the Registry uses it to say "revoked" or "replaced".
type statusCloser interface {
	closeWith(code websocket.StatusCode, reason string) error
}

var (
	_ net.Conn     = (*conn)(nil)
	_ statusCloser = (*conn)(nil)
)

// addr is a tunnel endpoint address: the hub as the daemon dialled it.
type addr struct{ network, s string }

func (a addr) Network() string { return a.network }
func (a addr) String() string  { return a.s }
