package preview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// portConn is a PortService.Connect call as a net.Conn: what is written
// goes to 127.0.0.1:PORT on the machine, what it sends back is read.
// Deadlines are not supported (the proxy does not set them).
type portConn struct {
	st     agentdv1.PortService_ConnectClient
	cancel context.CancelFunc
	done   func()

	rmu  sync.Mutex
	rbuf []byte
	rerr error

	wmu    sync.Mutex
	closed sync.Once
}

var _ net.Conn = (*portConn)(nil)

// dialPort opens a Connect call to port along up and waits for the
// daemon to have dialled it.
func dialPort(ctx context.Context, up Upstream, port uint32) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	if len(up.MD) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, up.MD)
	}
	fail := func(err error) (net.Conn, error) {
		cancel()
		if up.Done != nil {
			up.Done()
		}
		return nil, err
	}
	st, err := agentdv1.NewPortServiceClient(up.Conn).Connect(ctx, grpc.WaitForReady(false))
	if err != nil {
		return fail(err)
	}
	req := &agentdv1.ConnectRequest{Port: port}
	var offer StreamOffer
	if up.Stream != nil {
		offer = up.Stream()
		defer offer.Cancel()
		req.StreamToken = offer.Token()
	}
	if err := st.Send(req); err != nil {
		_, err = st.Recv()
		return fail(err)
	}
	m, err := st.Recv()
	if err != nil {
		return fail(err)
	}
	if !m.GetConnected() {
		return fail(errors.New("the daemon answered without connecting"))
	}
	done := up.Done
	if done == nil {
		done = func() {}
	}
	if m.GetStream() {
		if offer == nil {
			return fail(errors.New("the daemon answered with a byte stream nobody offered"))
		}
		// The hub switched protocols before the daemon said so: the
		// stream is here or about to be.
		wctx, wcancel := context.WithTimeout(ctx, streamWait)
		sc, err := offer.Wait(wctx)
		wcancel()
		if err != nil {
			return fail(fmt.Errorf("the daemon's byte stream did not arrive: %w", err))
		}
		return &streamConn{Conn: sc, cancel: cancel, done: done}, nil
	}
	return &portConn{st: st, cancel: cancel, done: done}, nil
}

// streamWait bounds the wait for a byte stream the daemon said it opened.
const streamWait = 10 * time.Second

// streamConn is a connection carried on the daemon's byte stream: reads
// and writes go to the stream as they are; the Connect call beside it
// lives as long and is cancelled by Close, as a portConn's.
type streamConn struct {
	net.Conn
	cancel context.CancelFunc
	done   func()
	closed sync.Once
}

// CloseWrite half-closes: the target reads EOF.
func (c *streamConn) CloseWrite() error { return transport.CloseWrite(c.Conn) }

// Close ends the stream and the call.
func (c *streamConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() {
		c.cancel()
		c.done()
	})
	return err
}

func (c *portConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.rbuf) == 0 {
		if c.rerr != nil {
			return 0, c.rerr
		}
		m, err := c.st.Recv()
		switch {
		case errors.Is(err, io.EOF):
			c.rerr = io.EOF
		case err != nil:
			c.rerr = fmt.Errorf("preview upstream: %w", err)
		default:
			c.rbuf = m.GetData()
			if m.GetEof() {
				c.rerr = io.EOF
			}
		}
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// maxChunk bounds one message of the upstream call.
const maxChunk = 32 << 10

func (c *portConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	for len(p) > 0 {
		k := min(len(p), maxChunk)
		if err := c.st.Send(&agentdv1.ConnectRequest{Data: p[:k]}); err != nil {
			return n, fmt.Errorf("preview upstream: %w", err)
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

// CloseWrite half-closes: the target reads EOF.
func (c *portConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.st.CloseSend()
}

// Close ends the call.
func (c *portConn) Close() error {
	c.closed.Do(func() {
		c.cancel()
		c.done()
	})
	return nil
}

type portAddr struct{}

func (portAddr) Network() string { return "agentd" }
func (portAddr) String() string  { return "agentd-port" }

func (c *portConn) LocalAddr() net.Addr                { return portAddr{} }
func (c *portConn) RemoteAddr() net.Addr               { return portAddr{} }
func (c *portConn) SetDeadline(t time.Time) error      { return nil }
func (c *portConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *portConn) SetWriteDeadline(t time.Time) error { return nil }
