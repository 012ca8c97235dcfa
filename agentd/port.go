package agentd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/ports"
	"github.com/devdepot-ai/agentd/internal/units"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// portService serves agentdv1.PortService: the host's listening ports,
// and connections to them. It dials 127.0.0.1 only: a caller names a
// port, never a host.
type portService struct {
	agentdv1.UnimplementedPortServiceServer
	s *Server
}

var _ agentdv1.PortServiceServer = (*portService)(nil)

// portChunk is the size of the first read from the target (all a quiet
// connection needs); a busy one grows to maxPortChunk.
const portChunk = 32 << 10

// maxPortChunk is what a busy connection's reads grow to: a message of
// the target's bytes stays well under the gRPC message cap.
const maxPortChunk = 256 << 10

// List lists the listening TCP sockets.
func (p *portService) List(ctx context.Context, _ *agentdv1.PortServiceListRequest) (*agentdv1.PortServiceListResponse, error) {
	socks, err := ports.Listening(ctx)
	if errors.Is(err, ports.ErrUnsupported) {
		return nil, errs.New(errs.Unimplemented, "%v; this daemon runs on %s (port forward and expose work everywhere)", err, runtime.GOOS)
	}
	if err != nil {
		return nil, err
	}
	resp := &agentdv1.PortServiceListResponse{}
	for _, s := range socks {
		resp.Ports = append(resp.Ports, &agentdv1.ListeningPort{Port: uint32(s.Port), Address: s.Address, Network: s.Network,
			Pid: int32(s.PID), Command: s.Command})
	}
	return resp, nil
}

// Connect carries one TCP connection to 127.0.0.1:port (see the proto),
// or to [::1]:port when 127.0.0.1 refuses (a server on the IPv6 loopback
// only): either way a loopback of the machine agentd runs on.
func (p *portService) Connect(stream agentdv1.PortService_ConnectServer) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return invalidf("connect: the first message must name the port (1-65535); got none")
	}
	if err != nil {
		return err
	}
	port := first.GetPort()
	if port == 0 || port > 65535 {
		return invalidf("connect: port %d: want 1-65535 (the daemon dials 127.0.0.1:PORT)", port)
	}
	if len(first.GetData()) > 0 {
		return invalidf("connect: the first message names the port only; send data after the daemon answers connected")
	}
	ctx := stream.Context()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	start := time.Now()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if errors.Is(err, syscall.ECONNREFUSED) {
		// A server bound to the IPv6 loopback only (localhost resolving
		// to ::1 first): the same machine, the other loopback.
		addr6 := net.JoinHostPort("::1", strconv.Itoa(int(port)))
		if c6, err6 := d.DialContext(ctx, "tcp", addr6); err6 == nil {
			c, err, addr = c6, nil, addr6
		}
	}
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = errs.New(errs.Unavailable, "nothing listens on %s or [::1]:%d; start the server first, or see 'agentctl port ls'", addr, port)
		}
		p.record(ctx, port, addr, 0, 0, time.Since(start), err)
		return err
	}
	conn := c.(*net.TCPConn)
	defer conn.Close()
	if sc := p.dialStream(ctx, first.GetStreamToken()); sc != nil {
		return p.carryStream(ctx, stream, conn, sc, port, addr, start)
	}
	if err := stream.Send(&agentdv1.ConnectResponse{Connected: true}); err != nil {
		return err
	}

	var up, down atomic.Int64
	// Caller → target, until the caller half-closes (then half-close the
	// target) or the call ends. This goroutine's Recv returns once the
	// handler has: it ends with the call.
	upDone := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				upDone <- conn.CloseWrite()
				return
			}
			if err != nil {
				upDone <- err
				return
			}
			n, err := conn.Write(m.GetData())
			up.Add(int64(n))
			if err != nil {
				upDone <- fmt.Errorf("write to %s: %w", addr, err)
				return
			}
		}
	}()
	// Target → caller, until the target closes its side (eof) or fails.
	downDone := make(chan error, 1)
	go func() {
		buf := make([]byte, portChunk)
		for {
			n, err := conn.Read(buf)
			// After a short read: a preview's server (python3 -m
			// http.server) waits ~40 ms for the ACK of a response's
			// headers before it sends the body otherwise. Full reads are
			// a bulk transfer, which the kernel acknowledges promptly.
			if n < len(buf) {
				quickAck(conn)
			}
			if n > 0 {
				down.Add(int64(n))
				if serr := stream.Send(&agentdv1.ConnectResponse{Data: buf[:n]}); serr != nil {
					downDone <- serr
					return
				}
			}
			if n == len(buf) && len(buf) < maxPortChunk {
				// A bulk transfer: fewer, larger messages through the
				// hub's relay, which pays per message.
				buf = make([]byte, 2*len(buf))
			}
			if errors.Is(err, io.EOF) {
				downDone <- stream.Send(&agentdv1.ConnectResponse{Eof: true})
				return
			}
			if err != nil {
				downDone <- fmt.Errorf("read from %s: %w", addr, err)
				return
			}
		}
	}()

	// Both directions done: the call ends well. Either failing ends it
	// at once: closing the connection stops the other.
	var result error
	for pending := 2; pending > 0; pending-- {
		var err error
		select {
		case err = <-upDone:
			upDone = nil
		case err = <-downDone:
			downDone = nil
		}
		if err != nil {
			result = err
			break
		}
	}
	conn.Close()
	if downDone != nil {
		// Its Read fails now that the connection is closed (a Send it is
		// in ends as the caller reads, which callers always do).
		<-downDone
	}
	if result != nil && ctx.Err() != nil {
		result = ctx.Err()
	}
	p.record(ctx, port, addr, up.Load(), down.Load(), time.Since(start), result)
	return result
}

// record adds a connection's record to the activity log.
func (p *portService) record(ctx context.Context, port uint32, addr string, up, down int64, d time.Duration, err error) {
	r := activity.Record{Kind: wire.KindPortConnect, ObjectID: strconv.Itoa(int(port)), Bytes: up + down, Duration: d, Outcome: activity.OK,
		Summary: fmt.Sprintf("connection to %s: %s in, %s out, %s", addr, units.Bytes(up), units.Bytes(down), d.Round(time.Millisecond))}
	if err != nil && !errors.Is(err, context.Canceled) {
		r.Outcome, r.Error = activity.Failed, err.Error()
	}
	p.s.record(ctx, r)
}
