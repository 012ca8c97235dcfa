package transport_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/devdepot-ai/agentd/transport"
)

// benchConn returns the hub's client connection to a daemon over the
// tunnel ("ws", "wss") or, for comparison, over plain loopback TCP with the
// same gRPC settings and no websocket ("tcp").
func benchConn(b *testing.B, mode string) grpc.ClientConnInterface {
	b.Helper()
	if mode == "tcp" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv, _ := newDaemonServer()
		served := make(chan struct{})
		go func() {
			defer close(served)
			srv.Serve(ln)
		}()
		cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithIdleTimeout(0),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			cc.Close()
			srv.Stop()
			<-served
		})
		return cc
	}
	cfg := hubConfig{}
	opts := transport.Options{}
	if mode == "wss" {
		opts.RootCAs, cfg.tls = testCA(b)
	}
	h := startHub(b, cfg)
	pub, key := newKey(b)
	h.addMachine("m-1", pub, "acme")
	o := daemonOptions(b, h.url(), "m-1", key)
	o.RootCAs = opts.RootCAs
	startDaemon(b, o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.health(ctx, "m-1"); err != nil {
		b.Fatal(err)
	}
	cc, _ := h.reg.Get("m-1")
	return cc
}

var benchModes = []string{"ws", "wss", "tcp"}

// A health check round trip, hub → daemon → hub.
func BenchmarkTunnelUnary(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			client := healthpb.NewHealthClient(benchConn(b, mode))
			req := &healthpb.HealthCheckRequest{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The daemon streams 32 KiB messages to the hub (the direction of command
// output and file reads).
func BenchmarkTunnelThroughput(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			cc := benchConn(b, mode)
			b.SetBytes(chunkSize)
			b.ReportAllocs()
			b.ResetTimer()
			s, err := pull(context.Background(), cc, b.N)
			if err != nil {
				b.Fatal(err)
			}
			n, err := drain(s, false)
			if err != nil {
				b.Fatal(err)
			}
			if n != int64(b.N)*chunkSize {
				b.Fatalf("got %d bytes, want %d", n, int64(b.N)*chunkSize)
			}
		})
	}
}
