package agentd

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// testServer is a daemon serving on a real unix socket in a temp dir.
type testServer struct {
	*Server
	Socket string
	Conn   *grpc.ClientConn
}

// newTestServer starts a Server on a unix socket and returns a client
// connection to it. Zero fields of opts get test defaults: a fresh
// workspace and state dir, and the test process's environment for children.
// Everything is stopped at the end of the test.
func newTestServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	dir := t.TempDir()
	if opts.Workspace == "" {
		opts.Workspace = filepath.Join(dir, "ws")
		if err := os.Mkdir(opts.Workspace, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(dir, "state")
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	srv, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sock := filepath.Join(dir, "agentd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: srv, Socket: sock, Conn: conn}
}
