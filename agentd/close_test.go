package agentd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// The tests in this file are not parallel: each checks that the process
// has no goroutine and no open audit file more at its end than at its
// start, which other tests running at the same time would upset.

// closeTestOptions are a server's options in a fresh temp dir.
func closeTestOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return Options{Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(), Logger: zaptest.NewLogger(t)}
}

// openCount is how many of the process's file descriptors are open on
// path, read from /proc/self/fd; the test is skipped where there is none.
func openCount(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count open files: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestCloseWithoutServe: a server made and closed without ever serving
// stops the Python janitor and the start-up probe and closes the audit
// log; Close again is a no-op and Serve after it refuses.
func TestCloseWithoutServe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	opts := closeTestOptions(t)
	audit := filepath.Join(opts.StateDir, activity.FileName)

	srv, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if n := openCount(t, audit); n != 1 {
		t.Fatalf("after New, %d descriptors are open on %s, want 1", n, audit)
	}
	srv.Close()
	if n := openCount(t, audit); n != 0 {
		t.Errorf("after Close, %d descriptors are open on %s, want 0", n, audit)
	}
	srv.Close() // twice is fine

	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(t.Context(), lis); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Close = %v, want ErrServerClosed", err)
	}
	if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Serve refused = %v, want net.ErrClosed (Serve closes its listeners)", err)
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(wire.KindStop)) {
		t.Errorf("a server that never served recorded %s:\n%s", wire.KindStop, data)
	}
}

// TestCloseStopsServe: Close called while Serve runs (twice, at once)
// stops it as its context would: Serve returns nil, the stop is recorded,
// the audit log is closed and nothing is left running.
func TestCloseStopsServe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	opts := closeTestOptions(t)
	audit := filepath.Join(opts.StateDir, activity.FileName)
	srv, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), lis) }()
	// Serving: a call has an answer.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health check: %v", err)
	}

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(srv.Close)
	}
	wg.Wait()
	if err := <-served; err != nil {
		t.Errorf("Serve stopped by Close = %v, want nil", err)
	}
	srv.Close()
	if n := openCount(t, audit); n != 0 {
		t.Errorf("after Close, %d descriptors are open on %s, want 0", n, audit)
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(wire.KindStop)) {
		t.Errorf("a server that served did not record %s:\n%s", wire.KindStop, data)
	}
}

// TestRunFailingAfterNewLeaksNothing: Run whose local socket cannot be
// opened (a regular file is in its place) returns the error with the
// server closed: no janitor, probe or tunnel left, the audit log closed.
func TestRunFailingAfterNewLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	opts := closeTestOptions(t)
	audit := filepath.Join(opts.StateDir, activity.FileName)
	sock := filepath.Join(t.TempDir(), "agentd.sock")
	if err := os.WriteFile(sock, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	err = Run(t.Context(), RunOptions{
		Server:  opts,
		Socket:  sock,
		Sandbox: &SandboxCredential{Hub: "http://127.0.0.1:1", ID: "m-test", Key: key},
	})
	if err == nil {
		t.Fatal("Run on a socket path that is a regular file succeeded, want an error")
	}
	if n := openCount(t, audit); n != 0 {
		t.Errorf("after Run failed, %d descriptors are open on %s, want 0", n, audit)
	}
}
