package fleet

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// loopback is a Broadcaster for one process: every Notify reaches every
// Listen, as Postgres' LISTEN/NOTIFY does across replicas.
type loopback struct {
	mu  sync.Mutex
	fns []func(channel, payload string)
}

func (b *loopback) Notify(_ context.Context, channel, payload string) error {
	b.mu.Lock()
	fns := b.fns
	b.mu.Unlock()
	for _, fn := range fns {
		fn(channel, payload)
	}
	return nil
}

func (b *loopback) Listen(ctx context.Context, _ []string, fn func(channel, payload string), ready func()) {
	b.mu.Lock()
	b.fns = append(b.fns, fn)
	b.mu.Unlock()
	ready()
	<-ctx.Done()
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A replica's events reach the typed subscriptions of every replica, its
// own too.
func TestBroadcastSubscriptions(t *testing.T) {
	t.Parallel()
	f, err := New(t.Context(), Options{Store: openStore(t), Logger: zaptest.NewLogger(t),
		Replica: &replica.Options{}, Broadcaster: &loopback{}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	revoked, asked, activity := make(chan string, 1), make(chan string, 1), make(chan struct{}, 1)
	f.OnRevoke(func(id string) { revoked <- id })
	f.OnSandboxAsked(func(id string) { asked <- id })
	f.OnActivity(func() { activity <- struct{}{} })

	f.Revoke(t.Context(), "m-1")
	f.AskSandbox(t.Context(), "sb-1")
	f.ActivityStored()
	if got := recv(t, "revocation", revoked); got != "m-1" {
		t.Errorf("revoked %q, want m-1", got)
	}
	if got := recv(t, "sandbox asked", asked); got != "sb-1" {
		t.Errorf("asked for %q, want sb-1", got)
	}
	recv(t, "activity", activity)
}

func recv[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no event", what)
		panic("unreachable")
	}
}

// The only hub on its store sends no events, routes nothing elsewhere and
// says so when asked for a replica's routes.
func TestNotAReplica(t *testing.T) {
	t.Parallel()
	f, err := New(t.Context(), Options{Store: openStore(t), Logger: zaptest.NewLogger(t), Broadcaster: &loopback{}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.OnRevoke(func(id string) { t.Errorf("revocation of %s broadcast by a hub that is not a replica", id) })
	f.Revoke(t.Context(), "m-1")
	f.AskSandbox(t.Context(), "sb-1")
	f.ActivityStored()
	if id := f.ReplicaID(); id != "" {
		t.Errorf("ReplicaID() = %q, want none", id)
	}
	if _, ok, err := f.RouteRemote(t.Context(), "m-1", nil); ok || err != nil {
		t.Errorf("RouteRemote = %v, %v; want no route", ok, err)
	}
	if _, err := f.Lookup(t.Context(), "m-1"); !errors.Is(err, ErrNotReplica) {
		t.Errorf("Lookup = %v, want ErrNotReplica", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ServeInternal(t.Context(), lis); err == nil {
		t.Error("ServeInternal on a hub that is not a replica succeeded")
	}
}
