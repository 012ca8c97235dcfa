package fleet

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/transport"
)

// Store is what the fleet reads and writes: machines (revocation, last
// seen), the secret the replicas' TLS is derived from, and, on a replica,
// the replica registry's tables. store.Store is one.
type Store interface {
	replica.Store
	ServerSecret(ctx context.Context) ([]byte, error)
	Machine(ctx context.Context, id string) (store.Machine, error)
	MachineSeen(ctx context.Context, id string, at time.Time, version string) error
}

var _ Store = store.Store(nil)

// Options configures a Fleet. Zero fields get defaults in New.
type Options struct {
	// Store holds the machines and, for replicas, the registry. Required.
	Store Store
	// Logger receives the fleet's logs. Default: a no-op logger.
	Logger *zap.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Replica, when set, makes the hub one of several replicas sharing
	// Store (see package replica): it registers, heartbeats, records which
	// machines' tunnels it holds, forwards calls for the others' and
	// serves theirs (ServeInternal). Its Store, Now and Logger default to
	// the fleet's. Nil: the only hub on its store.
	Replica *replica.Options
	// Broadcaster carries events between replicas (the store's
	// LISTEN/NOTIFY on Postgres). Used on a replica only; nil: events stay
	// on this replica (its heartbeat still catches revocations).
	Broadcaster Broadcaster
	// OnUp is called when a machine's tunnel comes up (also when it
	// replaces an older one), before the replicas learn of it.
	OnUp func(machineID string)
	// OnDown is called when a machine has no tunnel any more, after the
	// replicas learnt of it and its last-seen time is stored. OnUp and
	// OnDown are called one at a time, in order; they must return soon
	// and must not add or close tunnels.
	OnDown func(machineID string)
	// Admit, if set, is asked before a call another replica forwarded goes
	// down the tunnel of machineID: an error refuses the call (returned
	// to the caller as it is); the func it returns, if any, is the route's
	// Done.
	Admit func(ctx context.Context, machineID string) (done func(error) error, err error)
	// MaxHeaderBytes caps the header list of a forwarded call (default
	// 64 KiB).
	MaxHeaderBytes uint32
	// HandshakeTimeout bounds another replica's TLS handshake on the
	// internal listener (default 10 s).
	HandshakeTimeout time.Duration
}

// Fleet holds the tunnels of the machines connected to this hub and, on a
// replica, finds and reaches the tunnels the other replicas hold.
type Fleet struct {
	o        Options
	log      *zap.Logger
	tunnels  *transport.Registry
	replicas *replica.Registry // nil: the only hub
	peers    *peers            // replicas: connections to the others
	internal *grpc.Server      // replicas: serves forwarded calls
	bcast    Broadcaster       // replicas with a Broadcaster: events to the others
	pulse    chan struct{}     // with bcast: activity stored, to tell the others
	subs     subscriptions
	streams  *transport.Streams // byte streams the daemons open for forwarded connections

	ctx       context.Context // lives until Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Streams is where the daemons' byte streams arrive (served at
// transport.StreamPath): a forwarded connection to a machine whose tunnel
// is here offers its daemon one (see transport.Streams).
func (f *Fleet) Streams() *transport.Streams { return f.streams }

// ErrNotReplica is returned by what only a replica can do, on a hub that
// is not one.
var ErrNotReplica = errors.New("hub: not a replica")

// New builds the tunnel registry and, for a replica, registers it, starts
// its heartbeat, the forwarding server and, with a Broadcaster, listens
// for the other replicas' events (it returns once listening, or after
// 10 s with a warning). ctx bounds New only; Close stops what it started.
func New(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.Store == nil {
		return nil, errors.New("fleet: no store")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxHeaderBytes == 0 {
		opts.MaxHeaderBytes = 64 << 10
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	f := &Fleet{o: opts, log: opts.Logger, streams: transport.NewStreams()}
	f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	var err error
	f.tunnels, err = transport.NewRegistry(transport.RegistryOptions{
		Logger: f.log,
		OnUp:   f.machineUp,
		OnDown: f.machineDown,
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := f.startReplica(ctx); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// startReplica registers the hub as a replica, if it is one.
func (f *Fleet) startReplica(ctx context.Context) error {
	if f.o.Replica == nil {
		return nil
	}
	o := *f.o.Replica
	if o.Store == nil {
		o.Store = f.o.Store
	}
	if o.Now == nil {
		o.Now = f.o.Now
	}
	if o.Logger == nil {
		o.Logger = f.log
	}
	r, err := replica.New(o)
	if err != nil {
		return err
	}
	if err := f.startForwarding(ctx); err != nil {
		return err
	}
	if err := r.Register(ctx); err != nil {
		return err
	}
	f.replicas = r
	if f.o.Broadcaster != nil {
		f.startBroadcast(ctx, f.o.Broadcaster)
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		r.Run(f.ctx)
	}()
	return nil
}

// Close stops the forwarding server, the connections to other replicas,
// every tunnel, the replica's heartbeat and the event listener, and waits
// for them. It may be called more than once, and on a Fleet New gave up
// on half way.
func (f *Fleet) Close() {
	f.closeOnce.Do(func() {
		f.cancel()
		if f.internal != nil {
			f.internal.Stop()
		}
		if f.peers != nil {
			f.peers.close()
		}
		if f.tunnels != nil {
			f.tunnels.CloseAll()
		}
		f.wg.Wait()
	})
}

func (f *Fleet) machineUp(id string) {
	if f.o.OnUp != nil {
		f.o.OnUp(id)
	}
	if f.replicas != nil {
		f.replicas.Up(id)
	}
}

func (f *Fleet) machineDown(id string) {
	if f.replicas != nil {
		f.replicas.Down(id)
	}
	if err := f.o.Store.MachineSeen(context.WithoutCancel(f.ctx), id, f.o.Now(), ""); err != nil {
		f.log.Warn("recording last seen", zap.String("machine", id), zap.Error(err))
	}
	if f.o.OnDown != nil {
		f.o.OnDown(id)
	}
}

// Add takes a machine's new tunnel (an Acceptor's OnTunnel).
func (f *Fleet) Add(machineID string, conn net.Conn, remote string) {
	f.tunnels.Add(machineID, conn, remote)
}

// Get returns the machine's tunnel, if this hub holds it.
func (f *Fleet) Get(machineID string) (transport.MachineConn, bool) {
	return f.tunnels.Get(machineID)
}

// Wait returns the machine's tunnel once this hub holds it, or ctx's
// error.
func (f *Fleet) Wait(ctx context.Context, machineID string) (transport.MachineConn, error) {
	return f.tunnels.Wait(ctx, machineID)
}

// CloseTunnel closes the machine's tunnel, if this hub holds it, and
// reports whether it did.
func (f *Fleet) CloseTunnel(machineID string) bool {
	return f.tunnels.Close(machineID)
}

// Drain takes the machine offline while the calls on its tunnel finish
// (the daemon said it is stopping).
func (f *Fleet) Drain(machineID string) { f.tunnels.Drain(machineID) }

// CloseAll closes every tunnel (with a going-away status: daemons
// reconnect to the next hub).
func (f *Fleet) CloseAll() { f.tunnels.CloseAll() }

// Len is the number of live tunnels on this hub.
func (f *Fleet) Len() int { return f.tunnels.Len() }

// Tunnels describes the live tunnels on this hub.
func (f *Fleet) Tunnels() []transport.TunnelInfo { return f.tunnels.Tunnels() }

// CheckTunnels closes the tunnels whose machine was revoked (by another
// replica, or directly in the store) or deleted, and stores the others'
// last-seen time as now.
func (f *Fleet) CheckTunnels(ctx context.Context, now time.Time) {
	for _, ti := range f.tunnels.Tunnels() {
		m, err := f.o.Store.Machine(ctx, ti.MachineID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !m.RevokedAt.IsZero()) {
			f.tunnels.Close(ti.MachineID)
			continue
		}
		_ = f.o.Store.MachineSeen(ctx, ti.MachineID, now, "")
	}
}

// ReplicaID is the hub's ID in the replica registry ("" if it is not a
// replica).
func (f *Fleet) ReplicaID() string {
	if f.replicas == nil {
		return ""
	}
	return f.replicas.ID()
}

// Lookup finds which live replica holds the machine's tunnel
// (store.ErrNotFound: none). ErrNotReplica on a hub that is not one.
func (f *Fleet) Lookup(ctx context.Context, machineID string) (store.Route, error) {
	if f.replicas == nil {
		return store.Route{}, errs.Wrap(errs.Precondition, ErrNotReplica, "")
	}
	return f.replicas.Lookup(ctx, machineID)
}

// Routes lists which live replica holds each tunnel of the org's machines.
// ErrNotReplica on a hub that is not one.
func (f *Fleet) Routes(ctx context.Context, orgID string) ([]store.Route, error) {
	if f.replicas == nil {
		return nil, errs.Wrap(errs.Precondition, ErrNotReplica, "")
	}
	return f.replicas.Routes(ctx, orgID)
}
