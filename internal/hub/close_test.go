package hub_test

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// The tests in this file are not parallel: each checks that no goroutine
// is left at its end that was not there at its start, which other tests
// running at the same time would upset. The store is opened and closed
// inside that window: it is the caller's, and Close leaves it open.

func openStore(t *testing.T) *store.SQLite {
	t.Helper()
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestCloseWithoutServe: a hub made and closed without serving stops its
// heartbeat and its tunnels' client; Close again is a no-op, and Serve
// after it refuses and closes the listener.
func TestCloseWithoutServe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := openStore(t)
	defer st.Close()
	srv, err := hub.New(t.Context(), hub.Options{Store: st, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(t.Context(), lis, nil); !errors.Is(err, hub.ErrServerClosed) {
		t.Errorf("Serve after Close = %v, want ErrServerClosed", err)
	}
	if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Serve refused = %v, want net.ErrClosed (Serve closes its listener)", err)
	}
}

// TestCloseStopsServe: Close called while Serve runs (twice, at once)
// stops it as its context would; Serve returns nil and nothing is left.
func TestCloseStopsServe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := openStore(t)
	defer st.Close()
	srv, err := hub.New(t.Context(), hub.Options{Store: st, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(t.Context(), lis, nil) }()
	// Serving: a request has an answer.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + lis.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(srv.Close)
	}
	wg.Wait()
	if err := <-served; err != nil {
		t.Errorf("Serve stopped by Close = %v, want nil", err)
	}
	srv.Close()
}

// brokenDriver is a sandbox driver New never gets to call.
type brokenDriver struct{ sandbox.Driver }

// TestNewFailingLeaksNothing: New that fails half way (the sandboxes'
// socket path is taken by a regular file) releases what it had started:
// the tunnels' client and acceptor.
func TestNewFailingLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := openStore(t)
	defer st.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hub.sock"), []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := hub.New(t.Context(), hub.Options{Store: st, Logger: zaptest.NewLogger(t), Sandboxes: sandboxes.Options{
		Driver: brokenDriver{}, AgentdDir: t.TempDir(), SocketDir: dir,
	}})
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("New with the socket path taken = %v, want the listen error", err)
	}
}
