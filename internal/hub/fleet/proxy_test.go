package fleet

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/agentd"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// serveUnix serves srv on a unix socket in dir until the test ends.
func serveUnix(t *testing.T, dir, name string, serve func(net.Listener) error, stop func()) string {
	t.Helper()
	sock := filepath.Join(dir, name)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve(lis) }()
	t.Cleanup(func() { stop(); <-done })
	return sock
}

func dialUnix(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestProxyForwardsEveryKindOfCall puts the raw proxy between a client and
// a real daemon: unary, server-streaming and client-streaming calls, errors
// and metadata must come through unchanged.
func TestProxyForwardsEveryKindOfCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := agentd.New(t.Context(), agentd.Options{Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dsock := serveUnix(t, dir, "d.sock", func(l net.Listener) error { return d.Serve(ctx, l) }, cancel)
	machine := dialUnix(t, dsock)

	var gotActor []string
	hubSrv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(Proxy(
		func(ctx context.Context, method string) (Route, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			if len(md.Get("agentd-machine")) == 0 || md.Get("agentd-machine")[0] != "m-1" {
				return Route{}, status.Error(codes.NotFound, "machine not found")
			}
			gotActor = md.Get("x-test")
			return Route{Conn: machine, MD: metadata.Pairs("agentd-actor", "tester")}, nil
		})))
	hsock := serveUnix(t, dir, "h.sock", hubSrv.Serve, hubSrv.Stop)
	hub := dialUnix(t, hsock)
	cctx := metadata.AppendToOutgoingContext(t.Context(), "agentd-machine", "m-1", "x-test", "yes")

	info, err := agentdv1.NewSystemServiceClient(hub).Info(cctx, &agentdv1.InfoRequest{})
	if err != nil || info.GetWorkspace() != ws {
		t.Fatalf("Info through the proxy = %v, %v", info, err)
	}
	if len(gotActor) != 1 {
		t.Errorf("router saw metadata %v", gotActor)
	}

	// Client stream: Write.
	w, err := agentdv1.NewFileServiceClient(hub).Write(cctx)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	_ = w.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: "f.bin"}}})
	for i := 0; i < len(payload); i += 32 << 10 {
		_ = w.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: payload[i : i+32<<10]}})
	}
	wr, err := w.CloseAndRecv()
	if err != nil || wr.GetSize() != int64(len(payload)) {
		t.Fatalf("Write through the proxy = %v, %v", wr, err)
	}

	// Server stream: Read.
	rs, err := agentdv1.NewFileServiceClient(hub).Read(cctx, &agentdv1.ReadRequest{Path: "f.bin"})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		m, err := rs.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.GetData()...)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("Read through the proxy returned %d bytes, want %d identical", len(got), len(payload))
	}

	// Errors keep their code and message.
	_, err = agentdv1.NewFileServiceClient(hub).Stat(cctx, &agentdv1.StatRequest{Path: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Stat of a missing file through the proxy = %v, want NotFound", err)
	}
	// The router's refusal reaches the caller.
	_, err = agentdv1.NewSystemServiceClient(hub).Info(metadata.AppendToOutgoingContext(t.Context(), "agentd-machine", "m-2"), &agentdv1.InfoRequest{})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Info for an unknown machine = %v, want NotFound", err)
	}
}
