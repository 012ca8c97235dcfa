package preview

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/fleet"
	"github.com/devdepot-ai/agentd/transport"
)

// upConn is a connection to a port on the machine (fleet.DialPort's):
// closing it ends the Connect call beside it and tells the upstream.
type upConn struct {
	net.Conn
	cancel context.CancelFunc
	done   func()
	closed sync.Once
}

// dialPort opens a Connect call to port along up and waits for the
// daemon to have dialled it; the bytes go on the daemon's byte stream
// when up offers one and the daemon takes it.
func dialPort(ctx context.Context, up Upstream, port uint32) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	if len(up.MD) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, up.MD)
	}
	done := up.Done
	if done == nil {
		done = func() {}
	}
	var offer fleet.StreamOffer
	if up.Stream != nil {
		offer = up.Stream()
		defer offer.Cancel()
	}
	c, err := fleet.DialPort(ctx, up.Conn, port, offer)
	if err != nil {
		cancel()
		done()
		return nil, err
	}
	return &upConn{Conn: c, cancel: cancel, done: done}, nil
}

// CloseWrite half-closes: the target reads EOF.
func (c *upConn) CloseWrite() error { return transport.CloseWrite(c.Conn) }

// Close ends the connection and the call.
func (c *upConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() {
		c.cancel()
		c.done()
	})
	return err
}
