package sandboxes

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

// gcArchive is an archive store whose GC waits until the test lets it
// end, counting how many run at once: a fake, because the real store's GC
// ends too fast to see two overlap (the real one runs in the archive e2e
// tests).
type gcArchive struct {
	ArchiveStore // nil: only Delete and GC are called
	entered      chan string
	release      chan struct{}

	mu           sync.Mutex
	now, maxOnce int
}

func (a *gcArchive) Delete(context.Context, string, string) error { return nil }

func (a *gcArchive) GC(ctx context.Context, org string) (archive.GCStats, error) {
	a.mu.Lock()
	a.now++
	a.maxOnce = max(a.maxOnce, a.now)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.now--
		a.mu.Unlock()
	}()
	a.entered <- org
	select {
	case <-a.release:
	case <-ctx.Done():
	}
	return archive.GCStats{}, nil
}

func (a *gcArchive) Put(context.Context, string, string, io.Reader) (*archive.Manifest, error) {
	panic("not used")
}

type fixedReplica string

func (r fixedReplica) Lookup(context.Context, string) (store.Route, error) {
	return store.Route{}, store.ErrNotFound
}
func (r fixedReplica) ReplicaID() string { return string(r) }

// Two replicas on one Postgres database delete archives at once: the
// archive store's GC runs on one at a time (the store's lease), and the
// second still runs once the first is done, so that what it deleted is
// collected too.
func TestArchiveGCOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	st, err := store.OpenPostgres(t.Context(), pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	arch := &gcArchive{entered: make(chan string), release: make(chan struct{})}
	replica := func(id string) *Manager {
		if err := st.RegisterReplica(t.Context(), store.Replica{ID: id, Addr: "127.0.0.1:1", StartedAt: time.Now(), HeartbeatAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		m := &Manager{o: Options{Store: st, Archive: arch, HubID: "hub-" + id, Replicas: fixedReplica(id), Now: time.Now}, log: zaptest.NewLogger(t)}
		m.ctx, m.cancel = context.WithCancel(context.Background())
		t.Cleanup(func() { m.cancel(); m.Wait() })
		return m
	}
	a, b := replica("r-a"), replica("r-b")
	a.deleteArchive(t.Context(), "org-1", "ar-1")
	b.deleteArchive(t.Context(), "org-2", "ar-2")
	timeout := time.After(time.Minute)
	var first string
	select {
	case first = <-arch.entered:
	case <-timeout:
		t.Fatal("no replica ran the archive GC")
	}
	// The other waits for the lease: no second GC while the first runs.
	// It asks every gcLeaseWait, so two of its tries pass within this.
	select {
	case org := <-arch.entered:
		t.Fatalf("the GC of %s began while that of %s ran", org, first)
	case <-time.After(2*gcLeaseWait + time.Second):
	}
	arch.release <- struct{}{}
	var second string
	select {
	case second = <-arch.entered:
	case <-timeout:
		t.Fatalf("the GC after %s's never ran: the other replica's delete was not collected", first)
	}
	arch.release <- struct{}{}
	if first == second {
		t.Errorf("GC of %s twice, want org-1 and org-2", first)
	}
	arch.mu.Lock()
	defer arch.mu.Unlock()
	if arch.maxOnce != 1 {
		t.Errorf("%d archive GCs ran at once, want 1", arch.maxOnce)
	}
}
