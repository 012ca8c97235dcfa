package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// StreamOffer is a byte stream offered to a daemon or a caller for one
// forwarded connection (*transport.StreamOffer is one).
type StreamOffer interface {
	Token() string
	Wait(ctx context.Context) (net.Conn, error)
	Cancel()
}

var _ StreamOffer = (*transport.StreamOffer)(nil)

// streamWait bounds the wait for a byte stream the other side said it
// opened (a daemon) or was told to open (a caller).
const streamWait = 10 * time.Second

// DialPort opens a PortService.Connect call to port along cc and waits
// for the daemon to have dialled it; it returns the connection as a
// net.Conn: the daemon's byte stream when offer is set and the daemon
// took it, else the call's messages. The call lives as long as ctx: the
// caller cancels ctx after closing the connection (ctx carries the call's
// metadata).
func DialPort(ctx context.Context, cc grpc.ClientConnInterface, port uint32, offer StreamOffer) (net.Conn, error) {
	st, err := agentdv1.NewPortServiceClient(cc).Connect(ctx, grpc.WaitForReady(false))
	if err != nil {
		return nil, err
	}
	req := &agentdv1.ConnectRequest{Port: port}
	if offer != nil {
		req.StreamToken = offer.Token()
	}
	if err := st.Send(req); err != nil {
		_, err = st.Recv()
		return nil, err
	}
	m, err := st.Recv()
	if err != nil {
		return nil, err
	}
	if !m.GetConnected() {
		return nil, errors.New("the daemon answered without connecting")
	}
	if !m.GetStream() {
		return &portConn{st: st}, nil
	}
	if offer == nil {
		return nil, errors.New("the daemon answered with a byte stream nobody offered")
	}
	// The hub switched protocols before the daemon said so: the stream is
	// here or about to be.
	wctx, cancel := context.WithTimeout(ctx, streamWait)
	defer cancel()
	sc, err := offer.Wait(wctx)
	if err != nil {
		return nil, fmt.Errorf("the daemon's byte stream did not arrive: %w", err)
	}
	return sc, nil
}

// portConn is a PortService.Connect call as a net.Conn: what is written
// goes to 127.0.0.1:PORT on the machine, what it sends back is read.
// Deadlines are not supported; Close does not end the call (its
// context's cancel does).
type portConn struct {
	st agentdv1.PortService_ConnectClient

	rmu  sync.Mutex
	rbuf []byte
	rerr error

	wmu sync.Mutex
}

var _ net.Conn = (*portConn)(nil)

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
			c.rerr = fmt.Errorf("port upstream: %w", err)
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
			return n, fmt.Errorf("port upstream: %w", err)
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

// Close does nothing: the call ends with its context.
func (c *portConn) Close() error { return nil }

type portAddr struct{}

func (portAddr) Network() string { return "agentd" }
func (portAddr) String() string  { return "agentd-port" }

func (c *portConn) LocalAddr() net.Addr                { return portAddr{} }
func (c *portConn) RemoteAddr() net.Addr               { return portAddr{} }
func (c *portConn) SetDeadline(t time.Time) error      { return nil }
func (c *portConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *portConn) SetWriteDeadline(t time.Time) error { return nil }
