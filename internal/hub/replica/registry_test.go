package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

// runRegistry starts a registry's Run; the returned stop ends it and waits.
func runRegistry(t *testing.T, opts replica.Options) (*replica.Registry, func()) {
	t.Helper()
	opts.Logger = zaptest.NewLogger(t)
	r, err := replica.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return r, stop
}

// eventually polls cond every 10 ms until it holds or the deadline passes,
// and returns how long it took.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return time.Since(start)
}

func routedTo(t *testing.T, r *replica.Registry, machine string) string {
	rt, err := r.Lookup(t.Context(), machine)
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt.ReplicaID
}

// TestRegistry: routes follow Up and Down; a replica that dies is noticed
// within its TTL and its routes dropped; one the others expired while it
// stalled comes back with its routes; one that stops cleanly leaves at once.
func TestRegistry(t *testing.T) {
	t.Parallel()
	st := openPostgres(t, pgtest.Database(t))
	ctx := t.Context()
	const beat, ttl = 100 * time.Millisecond, 500 * time.Millisecond
	a, stopA := runRegistry(t, replica.Options{Store: st, ID: "r-a", Addr: "127.0.0.1:1", Heartbeat: beat, TTL: ttl})

	a.Up("m-1")
	eventually(t, 2*time.Second, "m-1 routed to A", func() bool { return routedTo(t, a, "m-1") == "r-a" })
	a.Down("m-1")
	eventually(t, 2*time.Second, "m-1 unrouted", func() bool { return routedTo(t, a, "m-1") == "" })

	// A replica that dies holding a tunnel: registered, then silent.
	now := time.Now()
	if err := st.RegisterReplica(ctx, store.Replica{ID: "r-dead", Addr: "127.0.0.1:2", StartedAt: now, HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRoute(ctx, "m-2", "r-dead", now); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 2*time.Second, "the dead replica's route dropped", func() bool { return routedTo(t, a, "m-2") == "" })
	t.Logf("dead replica's route not served after %s (TTL %s)", took, ttl)
	eventually(t, 2*time.Second, "the dead replica expired", func() bool {
		rs, err := st.ListReplicas(ctx)
		return err == nil && len(rs) == 1 && rs[0].ID == "r-a"
	})

	// A stalled replica the others expired registers again, routes and all.
	a.Up("m-3")
	eventually(t, 2*time.Second, "m-3 routed to A", func() bool { return routedTo(t, a, "m-3") == "r-a" })
	if err := st.DeleteReplica(ctx, "r-a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "m-3 routed to A again", func() bool { return routedTo(t, a, "m-3") == "r-a" })

	// A clean stop leaves the registry at once.
	stopA()
	rs, err := st.ListReplicas(ctx)
	if err != nil || len(rs) != 0 {
		t.Errorf("replicas after A stopped: %v (%v), want none", rs, err)
	}
	if got := routedTo(t, a, "m-3"); got != "" {
		t.Errorf("m-3 routed to %q after A stopped, want nowhere", got)
	}
}

func TestNewNeedsAStore(t *testing.T) {
	t.Parallel()
	if _, err := replica.New(replica.Options{}); err == nil {
		t.Error("New without a store succeeded")
	}
}
