package agentd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// streamBuffer is the size of each direction's buffer on a byte stream:
// a bulk transfer moves in few, large system calls.
const streamBuffer = 256 << 10

// dialStream opens the byte stream the hub offered with token (see
// ConnectRequest.stream_token), or returns nil: no token, a call that
// did not come through the tunnel, no tunnel, or a stream the hub did not
// take (the connection then goes in messages, as with an older hub).
func (p *portService) dialStream(ctx context.Context, token string) net.Conn {
	t := p.s.opts.Tunnel
	if token == "" || t == nil || t.t == nil || p.s.opts.NoByteStreams || !viaHub(ctx) {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sc, err := t.t.DialStream(dctx, token)
	if err != nil {
		if !errors.Is(err, transport.ErrStreamUnavailable) {
			p.s.log.Debug("byte stream refused; carrying the connection in messages", zap.Error(err))
		}
		return nil
	}
	return sc
}

// carryStream carries conn over the byte stream sc: it tells the hub so
// (connected and stream), copies both ways, half-closing each side as the
// other ends, and ends the call with the connection's outcome. The call
// ending (the hub's cancel) closes both.
func (p *portService) carryStream(ctx context.Context, stream agentdv1.PortService_ConnectServer, conn *net.TCPConn, sc net.Conn,
	port uint32, addr string, start time.Time) error {
	defer sc.Close()
	if err := stream.Send(&agentdv1.ConnectResponse{Connected: true, Stream: true}); err != nil {
		return err
	}
	var up, down atomic.Int64
	// Caller → target, until the hub half-closes the stream.
	upDone := make(chan error, 1)
	go func() {
		var n int64
		var err error
		if tc, ok := sc.(*net.TCPConn); ok {
			n, err = conn.ReadFrom(tc) // splice(2): both are TCP
		} else {
			n, err = io.CopyBuffer(onlyWriter{conn}, onlyReader{sc}, make([]byte, streamBuffer))
		}
		up.Add(n)
		if err != nil {
			upDone <- fmt.Errorf("byte stream to %s: %w", addr, err)
			return
		}
		upDone <- conn.CloseWrite()
	}()
	// Target → caller, until the target closes its side.
	downDone := make(chan error, 1)
	go func() {
		buf := make([]byte, streamBuffer)
		for {
			n, err := conn.Read(buf)
			if n < len(buf) {
				quickAck(conn) // as in Connect: a preview's server waits for it
			}
			if n > 0 {
				down.Add(int64(n))
				if _, werr := sc.Write(buf[:n]); werr != nil {
					downDone <- fmt.Errorf("byte stream from %s: %w", addr, werr)
					return
				}
			}
			if errors.Is(err, io.EOF) {
				downDone <- transport.CloseWrite(sc)
				return
			}
			if err != nil {
				downDone <- fmt.Errorf("read from %s: %w", addr, err)
				return
			}
		}
	}()
	var result error
	for pending := 2; pending > 0 && result == nil; pending-- {
		select {
		case result = <-upDone:
		case result = <-downDone:
		case <-ctx.Done():
			result = ctx.Err()
		}
	}
	conn.Close()
	sc.Close()
	if result != nil && ctx.Err() != nil {
		result = ctx.Err()
	}
	p.record(ctx, port, addr, up.Load(), down.Load(), time.Since(start), result)
	return result
}

// onlyReader and onlyWriter hide a connection's WriteTo and ReadFrom, so
// that io.CopyBuffer uses the buffer it is given.
type (
	onlyReader struct{ io.Reader }
	onlyWriter struct{ io.Writer }
)
