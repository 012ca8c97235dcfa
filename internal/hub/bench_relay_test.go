package hub_test

// The relay's benchmarks (issue 22): bytes from a TCP server on the
// daemon's loopback through PortService.Connect via a real hub and tunnel
// (what agentctl port forward and previews ride), with the CPU the whole
// process spent per GiB (hub, daemon and client: they share it here; the
// hub's own share is measured on its process by scripts/bench-hub.sh).
//
//	go test -run '^$' -bench 'BenchmarkHub(PortForward|Stdout)$' -benchtime 3x ./internal/hub/

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"go.uber.org/zap"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// reportCPU reports the CPU seconds spent per GiB moved since start
// (nothing where the process's CPU time cannot be read: cpuTime < 0).
func reportCPU(b *testing.B, start time.Duration, bytes int64) {
	if bytes > 0 && start >= 0 {
		b.ReportMetric((cpuTime(b)-start).Seconds()/(float64(bytes)/(1<<30)), "cpu-s/GiB")
	}
}

// zeroServer is a TCP server on loopback that sends size zero bytes to
// each connection, then closes it.
func zeroServer(tb testing.TB, size int) int {
	tb.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		buf := make([]byte, 256<<10)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := size; left > 0; {
					n, err := c.Write(buf[:min(left, len(buf))])
					if err != nil {
						return
					}
					left -= n
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// BenchmarkHubPortForward moves 256 MiB from a TCP server on the daemon's
// loopback to a client of the hub, through PortService.Connect: in its
// messages, and (/streams) on byte streams, as agentctl port forward does.
func BenchmarkHubPortForward(b *testing.B) {
	const size = 256 << 20
	h := newBenchHub(b, zap.NewNop())
	id := h.startDaemon()
	port := zeroServer(b, size)
	c := agentdv1.NewPortServiceClient(h.conn())
	ctx := authCtx(b.Context(), h.token, id)
	hubURL, err := url.Parse(h.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("messages", func(b *testing.B) { benchPortForward(b, c, ctx, port, size, nil) })
	b.Run("streams", func(b *testing.B) {
		benchPortForward(b, c, ctx, port, size, &transport.StreamDialer{URL: hubURL})
	})
}

func benchPortForward(b *testing.B, c agentdv1.PortServiceClient, ctx context.Context, port, size int, streams *transport.StreamDialer) {
	run := func() {
		st, err := c.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Send(&agentdv1.ConnectRequest{Port: uint32(port), Stream: streams != nil}); err != nil {
			b.Fatal(err)
		}
		if streams != nil {
			m, err := st.Recv()
			if err != nil || m.GetStreamToken() == "" {
				b.Fatalf("no stream token: %v, %v", m, err)
			}
			sc, err := streams.Dial(ctx, m.GetStreamToken())
			if err != nil {
				b.Fatal(err)
			}
			_ = transport.CloseWrite(sc)
			n, err := io.Copy(io.Discard, sc)
			sc.Close()
			if err != nil || n != int64(size) {
				b.Fatalf("port forward delivered %d bytes (%v), want %d", n, err, size)
			}
			_, _ = st.Recv() // the call's end
			return
		}
		n := 0
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(m.GetData())
			if m.GetEof() {
				break
			}
		}
		_ = st.CloseSend()
		if n != size {
			b.Fatalf("port forward delivered %d bytes, want %d", n, size)
		}
	}
	run() // warm up
	b.SetBytes(int64(size))
	start := cpuTime(b)
	for b.Loop() {
		run()
	}
	reportCPU(b, start, int64(b.N)*int64(size))
}
