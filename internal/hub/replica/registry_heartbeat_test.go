package replica_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

// slowRoutes is a store whose SetRoute waits until release is closed, and
// which counts heartbeats and registrations.
type slowRoutes struct {
	replica.Store
	entered chan struct{} // closed at the first SetRoute
	release chan struct{}
	once    atomic.Bool
	beats   atomic.Int64
	regs    atomic.Int64
}

func (s *slowRoutes) RegisterReplica(ctx context.Context, rep store.Replica) error {
	s.regs.Add(1)
	return s.Store.RegisterReplica(ctx, rep)
}

func (s *slowRoutes) SetRoute(ctx context.Context, machineID, replicaID string, at time.Time) error {
	if s.once.CompareAndSwap(false, true) {
		close(s.entered)
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.SetRoute(ctx, machineID, replicaID, at)
}

func (s *slowRoutes) ReplicaHeartbeat(ctx context.Context, id string, at time.Time) error {
	s.beats.Add(1)
	return s.Store.ReplicaHeartbeat(ctx, id, at)
}

// TestHeartbeatDoesNotWaitForRoutes: while route writes are stuck (a burst
// of tunnels after another replica died, a slow database), the replica
// keeps heartbeating, so the others do not expire it.
func TestHeartbeatDoesNotWaitForRoutes(t *testing.T) {
	t.Parallel()
	st := &slowRoutes{Store: openPostgres(t, pgtest.Database(t)), entered: make(chan struct{}), release: make(chan struct{})}
	const beat = 50 * time.Millisecond
	r, _ := runRegistry(t, replica.Options{Store: st, ID: "r-a", Addr: "127.0.0.1:1", Heartbeat: beat, TTL: 10 * beat})
	r.Up("m-1")
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no route write within 10 s")
	}
	before := st.beats.Load()
	eventually(t, 10*time.Second, "three heartbeats while a route write is stuck", func() bool { return st.beats.Load() >= before+3 })
	close(st.release)
	eventually(t, 10*time.Second, "m-1 routed to A once the write goes through", func() bool { return routedTo(t, r, "m-1") == "r-a" })
	if n := st.regs.Load(); n != 1 {
		t.Errorf("the replica registered %d times, want once (never expired by a late heartbeat)", n)
	}
}
