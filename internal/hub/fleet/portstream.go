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
func forwardConnect(ss grpc.ServerStream, r Route, method string) error {
	first := &frame{}
	if err := ss.RecvMsg(first); err != nil {
		if errors.Is(err, io.EOF) {
			return errs.New(errs.Invalid, "connect: the first message must name the port (1-65535); got none")
		}
		return err
	}
	var req agentdv1.ConnectRequest
	if err := proto.Unmarshal(first.data.Materialize(), &req); err != nil || !req.GetStream() {
		return forward(ss, r, method, first)
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
	wctx, wcancel := context.WithTimeout(ctx, streamWait)
	caller, err := co.Wait(wctx)
	wcancel()
	if err != nil {
		return errs.New(errs.Timeout, "the caller did not open its byte stream in %s", streamWait)
	}
	defer caller.Close()
	return splice(ctx, caller, target)
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
