package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/devdepot-ai/agentd/internal/errs"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// connectMethod is the call whose connections byte streams carry.
const connectMethod = "/agentd.v1.PortService/Connect"

// relayBuffer is each direction's buffer where the hub copies a byte
// stream: a bulk transfer moves in few, large system calls.
const relayBuffer = 256 << 10

// forwardConnect forwards a PortService.Connect call. A caller that asks
// for a byte stream (an agentctl that knows them) gets one: the hub dials
// the port through the daemon (on the daemon's byte stream when
// r.StreamMachine is set and the daemon takes it, else in messages),
// answers connected with a token, takes the caller's stream and copies
// between the two until both directions are done. Any other caller's
// call is forwarded frame by frame, as every call is.
func forwardConnect(ss grpc.ServerStream, r Route, method string, fw *forwarded) error {
	first := &frame{}
	if err := ss.RecvMsg(first); err != nil {
		if errors.Is(err, io.EOF) {
			return errs.New(errs.Invalid, "connect: the first message must name the port (1-65535); got none")
		}
		return err
	}
	var req agentdv1.ConnectRequest
	if err := proto.Unmarshal(first.data.Materialize(), &req); err != nil || !req.GetStream() {
		return forward(ss, r, method, first, fw)
	}
	first.free()

	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	ctx = metadata.NewOutgoingContext(ctx, r.MD)
	var offer StreamOffer
	if r.StreamMachine != "" {
		o := r.Streams.Offer(r.StreamMachine)
		defer o.Cancel()
		offer = o
	}
	target, err := DialPort(ctx, r.Conn, req.GetPort(), offer)
	if err != nil {
		return err
	}
	defer target.Close()
	co := r.Streams.Offer("")
	defer co.Cancel()
	if err := ss.SendMsg(&agentdv1.ConnectResponse{Connected: true, StreamToken: co.Token()}); err != nil {
		return err
	}
	// The caller opens its stream, or declines with a message on the call
	// (its stream could not reach this hub: another replica behind a
	// load balancer, a proxy that does not pass upgrades) and the bytes go
	// in the call's messages.
	declined := make(chan error, 1)
	go func() { declined <- ss.RecvMsg(new(agentdv1.ConnectRequest)) }()
	arrived, gone := make(chan net.Conn), make(chan struct{})
	defer close(gone)
	wctx, wcancel := context.WithTimeout(ctx, streamWait)
	defer wcancel()
	go func() {
		c, err := co.Wait(wctx)
		if err != nil {
			return
		}
		select {
		case arrived <- c:
		case <-gone: // declined, or the call ended, meanwhile
			c.Close()
		}
	}()
	select {
	case caller := <-arrived:
		defer caller.Close()
		return splice(ctx, caller, target)
	case err := <-declined:
		if err != nil {
			return err
		}
		co.Cancel()
		return relayMessages(ctx, ss, target)
	case <-wctx.Done():
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errs.New(errs.Timeout, "the caller neither opened its byte stream nor declined it in %s", streamWait)
	}
}

// relayMessages carries target in the call's messages, as a daemon does:
// data both ways, the caller's half-close as the target's, the target's
// as eof.
func relayMessages(ctx context.Context, ss grpc.ServerStream, target net.Conn) error {
	up := make(chan error, 1)
	go func() {
		for {
			m := new(agentdv1.ConnectRequest)
			if err := ss.RecvMsg(m); err != nil {
				if errors.Is(err, io.EOF) {
					err = transport.CloseWrite(target)
				}
				up <- err
				return
			}
			if _, err := target.Write(m.GetData()); err != nil {
				up <- err
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := target.Read(buf)
		if n > 0 {
			if serr := ss.SendMsg(&agentdv1.ConnectResponse{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) {
			if err := ss.SendMsg(&agentdv1.ConnectResponse{Eof: true}); err != nil {
				return err
			}
			break
		}
		if err != nil {
			return fmt.Errorf("port connection: %w", err)
		}
	}
	select {
	case err := <-up:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// splice copies between a and b until both directions are done (each
// half-closing the other side as its source ends), either fails, or ctx
// ends; it closes neither.
func splice(ctx context.Context, a, b net.Conn) error {
	done := make(chan error, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, make([]byte, relayBuffer))
		if err == nil {
			err = transport.CloseWrite(dst)
		}
		done <- err
	}
	go cp(b, a)
	go cp(a, b)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				a.Close()
				b.Close()
				return fmt.Errorf("port connection: %w", err)
			}
		case <-ctx.Done():
			a.Close()
			b.Close()
			return ctx.Err()
		}
	}
	return nil
}

// onlyReader and onlyWriter hide a connection's WriteTo and ReadFrom, so
// that io.CopyBuffer uses the buffer it is given.
type (
	onlyReader struct{ io.Reader }
	onlyWriter struct{ io.Writer }
)
