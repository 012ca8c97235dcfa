package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Store is what the registry needs from the hub's store.
type Store interface {
	RegisterReplica(ctx context.Context, r store.Replica) error
	ReplicaHeartbeat(ctx context.Context, id string, at time.Time) error
	DeleteReplica(ctx context.Context, id string) error
	ExpireReplicas(ctx context.Context, before time.Time) (int64, error)
	SetRoute(ctx context.Context, machineID, replicaID string, at time.Time) error
	DeleteRoute(ctx context.Context, machineID, replicaID string) error
	Route(ctx context.Context, machineID string, aliveSince time.Time) (store.Route, error)
	ListRoutes(ctx context.Context, orgID string, aliveSince time.Time) ([]store.Route, error)
}

var _ Store = store.Store(nil)

// Options configures a Registry. Zero fields get defaults in New.
type Options struct {
	// Store is the database the replicas share. Required.
	Store Store
	// ID names this replica. Default: a new random "r-…" ID, so that a
	// restarted process is a new replica.
	ID string
	// Addr is the host:port other replicas forward calls to. Default "":
	// recorded as is (the replica takes no forwarded calls).
	Addr string
	// Heartbeat is how often the replica records that it is alive, expires
	// silent replicas and writes its routes (default 1 s).
	Heartbeat time.Duration
	// TTL is how long a replica may stay silent before the others count
	// it dead and drop its routes (default 5 s; at least 2 heartbeats).
	TTL time.Duration
	// RouteCache is how long a route Lookup found is used again without
	// asking the database (default the heartbeat; negative: never cached).
	// A route that fails is dropped at once (Forget), so a machine that
	// moved costs at most one failed call; this bound is for a holder that
	// neither answers nor fails (hung), whose routes the database stops
	// serving after the TTL.
	RouteCache time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the registry's logs (default a no-op logger).
	Logger *zap.Logger
}

// Registry is one replica's entry in the shared registry: it registers,
// heartbeats, expires replicas that fell silent, and records which
// machines' tunnels this replica holds. Up and Down never wait for the
// database: the changes are written by Run, in order, coalesced per machine.
type Registry struct {
	opts Options
	log  *zap.Logger

	mu      sync.Mutex
	held    map[string]time.Time // machines whose tunnel this replica holds, since
	pending map[string]bool      // route changes not written yet: true up, false down
	wake    chan struct{}
	routes  map[string]cachedRoute // Lookup's recent answers, by machine
}

// cachedRoute is a route Lookup found, and until when it may be used.
type cachedRoute struct {
	route store.Route
	until time.Time
}

// maxCachedRoutes bounds the route cache; past it, expired entries are
// swept, and if none were, the cache starts afresh.
const maxCachedRoutes = 100_000

// New returns a Registry; Run registers it.
func New(opts Options) (*Registry, error) {
	if opts.Store == nil {
		return nil, errors.New("replica: no store")
	}
	if opts.ID == "" {
		opts.ID = store.NewID("r-")
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = time.Second
	}
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Second
	}
	opts.TTL = max(opts.TTL, 2*opts.Heartbeat)
	if opts.RouteCache == 0 {
		opts.RouteCache = opts.Heartbeat
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Registry{
		opts:    opts,
		log:     opts.Logger.Named("replica").With(zap.String("replica", opts.ID)),
		held:    map[string]time.Time{},
		pending: map[string]bool{},
		wake:    make(chan struct{}, 1),
		routes:  map[string]cachedRoute{},
	}, nil
}

// ID returns the replica's ID.
func (r *Registry) ID() string { return r.opts.ID }

// Up records that this replica now holds the machine's tunnel.
func (r *Registry) Up(machineID string) { r.change(machineID, true) }

// Down records that this replica no longer holds the machine's tunnel.
func (r *Registry) Down(machineID string) { r.change(machineID, false) }

func (r *Registry) change(machineID string, up bool) {
	r.mu.Lock()
	if up {
		r.held[machineID] = r.opts.Now()
	} else {
		delete(r.held, machineID)
	}
	r.pending[machineID] = up
	delete(r.routes, machineID)
	r.mu.Unlock()
	r.poke()
}

// poke wakes the route writer.
func (r *Registry) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Lookup returns the route of a machine whose tunnel a live replica holds;
// store.ErrNotFound if none does. A route found is cached for
// Options.RouteCache; the caller Forgets it when a call along it fails.
func (r *Registry) Lookup(ctx context.Context, machineID string) (store.Route, error) {
	now := r.opts.Now()
	if r.opts.RouteCache > 0 {
		r.mu.Lock()
		c, ok := r.routes[machineID]
		r.mu.Unlock()
		if ok && now.Before(c.until) {
			return c.route, nil
		}
	}
	rt, err := r.opts.Store.Route(ctx, machineID, now.Add(-r.opts.TTL))
	if err != nil || r.opts.RouteCache <= 0 || rt.ReplicaID == r.opts.ID {
		return rt, err // this replica's own route is stale (Down came first): not kept
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.routes) >= maxCachedRoutes {
		r.sweepRoutes(now)
	}
	r.routes[machineID] = cachedRoute{route: rt, until: now.Add(r.opts.RouteCache)}
	return rt, nil
}

// Forget drops the cached route of the machine if it still names the
// replica replicaID: a call along it failed, so the next Lookup asks the
// database. A route cached since then (another call looked again) stays.
func (r *Registry) Forget(machineID, replicaID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.routes[machineID]; ok && c.route.ReplicaID == replicaID {
		delete(r.routes, machineID)
	}
}

// sweepRoutes drops expired cache entries, or all if none had expired.
// r.mu is held.
func (r *Registry) sweepRoutes(now time.Time) {
	for id, c := range r.routes {
		if !now.Before(c.until) {
			delete(r.routes, id)
		}
	}
	if len(r.routes) >= maxCachedRoutes {
		clear(r.routes)
	}
}

// Register enters the replica in the registry, before Run, which keeps it
// there.
func (r *Registry) Register(ctx context.Context) error { return r.register(ctx) }

// Routes returns the live routes of the org's machines, by machine ID.
func (r *Registry) Routes(ctx context.Context, orgID string) ([]store.Route, error) {
	return r.opts.Store.ListRoutes(ctx, orgID, r.opts.Now().Add(-r.opts.TTL))
}

// Run keeps the replica's entry and routes current until ctx ends; then it
// deletes the entry (and so its routes), so that the other replicas need
// not wait for it to expire. The heartbeat and the route writes run apart:
// a burst of tunnels coming up (after another replica died, say) must not
// hold the heartbeat back past the TTL, or the others expire this replica
// too, routes and all.
func (r *Registry) Run(ctx context.Context) {
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := r.opts.Store.DeleteReplica(dctx, r.opts.ID); err != nil {
			r.log.Warn("leaving the replica registry", zap.Error(err))
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() { r.heartbeat(ctx) })
	r.routeWriter(ctx)
	wg.Wait()
}

// heartbeat beats every Options.Heartbeat until ctx ends.
func (r *Registry) heartbeat(ctx context.Context) {
	t := time.NewTicker(r.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.beat(ctx)
		}
	}
}

// routeWriter writes route changes as they come, and retries failed ones
// every heartbeat, until ctx ends. It is the only writer of routes once
// Run started, so a machine's changes are written in order.
func (r *Registry) routeWriter(ctx context.Context) {
	t := time.NewTicker(r.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-t.C:
		}
		r.writeRoutes(ctx)
	}
}

// register enters the replica, and every route it holds, afresh.
func (r *Registry) register(ctx context.Context) error {
	if err := r.registerRow(ctx); err != nil {
		return err
	}
	r.writeRoutes(ctx)
	return nil
}

// registerRow enters the replica and marks every route it holds as to be
// written again.
func (r *Registry) registerRow(ctx context.Context) error {
	now := r.opts.Now()
	err := r.opts.Store.RegisterReplica(ctx, store.Replica{ID: r.opts.ID, Addr: r.opts.Addr, StartedAt: now, HeartbeatAt: now})
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	r.mu.Lock()
	for id := range r.held {
		r.pending[id] = true
	}
	r.mu.Unlock()
	return nil
}

// beat records that the replica is alive and expires the silent ones. A
// replica the others expired (it was stalled past the TTL) registers again.
func (r *Registry) beat(ctx context.Context) {
	now := r.opts.Now()
	err := r.opts.Store.ReplicaHeartbeat(ctx, r.opts.ID, now)
	if errors.Is(err, store.ErrNotFound) {
		r.log.Warn("this replica was expired by the others: registering again")
		if err = r.registerRow(ctx); err == nil {
			r.poke() // the route writer writes its routes again
		}
	}
	if err != nil && ctx.Err() == nil {
		r.log.Warn("replica heartbeat", zap.Error(err))
	}
	n, err := r.opts.Store.ExpireReplicas(ctx, now.Add(-r.opts.TTL))
	if err != nil && ctx.Err() == nil {
		r.log.Warn("expiring silent replicas", zap.Error(err))
	}
	if n > 0 {
		r.log.Info("expired silent replicas and their routes", zap.Int64("replicas", n))
	}
}

// routeWriters is how many route changes writeRoutes writes at once: a
// burst of tunnels (a replica died and its machines came here) is routed
// sooner, and the pool (store.DefaultPostgresPool) keeps room for calls.
const routeWriters = 4

// writeRoutes writes the pending route changes; failed ones stay pending.
// Each machine is in one batch at most once, and batches do not overlap,
// so a machine's changes are written in order.
func (r *Registry) writeRoutes(ctx context.Context) {
	r.mu.Lock()
	todo := r.pending
	r.pending = map[string]bool{}
	since := make(map[string]time.Time, len(todo))
	for id := range todo {
		since[id] = r.held[id]
	}
	r.mu.Unlock()
	ids := make(chan string)
	var wg sync.WaitGroup
	for range min(routeWriters, len(todo)) {
		wg.Go(func() {
			for id := range ids {
				r.writeRoute(ctx, id, todo[id], since[id])
			}
		})
	}
	for id := range todo {
		ids <- id
	}
	close(ids)
	wg.Wait()
}

// writeRoute writes one route change; if it fails, it stays pending
// unless a newer one came meanwhile.
func (r *Registry) writeRoute(ctx context.Context, id string, up bool, since time.Time) {
	var err error
	if up {
		err = r.opts.Store.SetRoute(ctx, id, r.opts.ID, since)
	} else {
		err = r.opts.Store.DeleteRoute(ctx, id, r.opts.ID)
	}
	if err == nil {
		return
	}
	if ctx.Err() == nil {
		r.log.Warn("recording a route", zap.String("machine", id), zap.Bool("up", up), zap.Error(err))
	}
	r.mu.Lock()
	if _, newer := r.pending[id]; !newer {
		r.pending[id] = up
	}
	r.mu.Unlock()
}
