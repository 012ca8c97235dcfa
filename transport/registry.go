package transport

import (
	"context"
	"errors"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// RegistryOptions configures a Registry. Zero fields get defaults in
// NewRegistry.
type RegistryOptions struct {
	// Logger receives the registry's logs. Default: a no-op logger.
	Logger *zap.Logger
	// OnUp is called when a machine's tunnel is added (also when it
	// replaces an older one).
	OnUp func(machineID string)
	// OnDown is called when a machine has no tunnel any more: it broke,
	// the daemon closed it, or Close revoked it; not when a newer tunnel
	// replaced it. OnUp and OnDown are called one at a time, in order; they
	// must return soon and must not call Add, Close or CloseAll.
	OnDown func(machineID string)
	// DialOptions are added to the gRPC client options of every tunnel
	// (interceptors, stats handlers…).
	DialOptions []grpc.DialOption
	// ReadBufferSize is gRPC's read buffer per tunnel. Default 0: none,
	// HTTP/2 frames are read straight from the websocket, which has its
	// own 4 KiB buffer; gRPC's default of 32 KiB would double the memory
	// of an idle tunnel.
	ReadBufferSize int
}

// TunnelInfo describes a live tunnel.
type TunnelInfo struct {
	MachineID string
	Remote    string    // the daemon's address as the hub saw it
	Since     time.Time // when the tunnel came up
}

// Registry holds the hub's gRPC client connection to each machine, one per
// live tunnel. Add is an Acceptor's OnTunnel.
type Registry struct {
	opts RegistryOptions
	log  *zap.Logger

	evMu sync.Mutex // orders Add, removals and the OnUp/OnDown calls

	mu       sync.Mutex
	machines map[string]*entry
	draining map[*entry]struct{} // offline, their last calls finishing (see Drain)
	changed  chan struct{}       // closed and replaced on every change
	closed   bool
	wg       sync.WaitGroup // removals in flight
}

type entry struct {
	TunnelInfo
	cc   *grpc.ClientConn
	conn *watchedConn
}

// NewRegistry returns an empty Registry.
func NewRegistry(opts RegistryOptions) *Registry {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Registry{
		opts:     opts,
		log:      opts.Logger.Named("tunnels"),
		machines: make(map[string]*entry),
		draining: make(map[*entry]struct{}),
		changed:  make(chan struct{}),
	}
}

// statusReplaced closes a tunnel that a newer one of the same machine
// replaced. Not going-away: the daemon's NetConn would read that as a
// plain EOF and lose the reason.
const statusReplaced websocket.StatusCode = 4000

var errTunnelUsed = errors.New("the tunnel is gone; the machine has to reconnect")

// Add makes conn the machine's tunnel: a gRPC client connection rides on it
// (the daemon is the server). An older tunnel of the same machine is closed.
// The registry owns conn from now on.
func (r *Registry) Add(machineID string, conn net.Conn, remote string) {
	wc := &watchedConn{Conn: conn}
	var used atomic.Bool
	dial := func(context.Context, string) (net.Conn, error) {
		if used.Swap(true) {
			return nil, errTunnelUsed
		}
		return wc, nil
	}
	opts := append([]grpc.DialOption{
		grpc.WithContextDialer(dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()), // TLS is the websocket's
		grpc.WithIdleTimeout(0),
		grpc.WithReadBufferSize(r.opts.ReadBufferSize),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	}, r.opts.DialOptions...)
	cc, err := grpc.NewClient("passthrough:///"+machineID, opts...)
	if err != nil {
		r.log.Error("cannot make a gRPC client for a tunnel", zap.String("machine", machineID), zap.Error(err))
		conn.Close()
		return
	}
	e := &entry{TunnelInfo: TunnelInfo{MachineID: machineID, Remote: remote, Since: time.Now()}, cc: cc, conn: wc}

	// Removal runs on its own goroutine, as the conn may end inside a gRPC
	// read. Set before anyone else can see wc.
	wc.onEnd = func() { go r.remove(e) }

	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		wc.onEnd = nil
		cc.Close()
		closeStatus(wc, websocket.StatusGoingAway, "hub shutting down")
		return
	}
	old := r.machines[machineID]
	r.machines[machineID] = e
	r.wg.Add(1) // for remove(e)
	r.broadcastLocked()
	r.mu.Unlock()
	if old != nil {
		r.log.Info("machine reconnected; closing its older tunnel", zap.String("machine", machineID))
		r.closeAsync(old, statusReplaced, "replaced by a newer tunnel")
	}
	cc.Connect()
	if r.opts.OnUp != nil {
		r.opts.OnUp(machineID)
	}
}

// remove forgets e once its tunnel has ended and closes its client.
func (r *Registry) remove(e *entry) {
	defer r.wg.Done()
	r.evMu.Lock()
	r.mu.Lock()
	current := r.machines[e.MachineID] == e
	if current {
		delete(r.machines, e.MachineID)
		r.broadcastLocked()
	}
	delete(r.draining, e)
	r.mu.Unlock()
	if current && r.opts.OnDown != nil {
		r.opts.OnDown(e.MachineID)
	}
	r.evMu.Unlock()
	e.cc.Close()
	e.conn.Close()
}

// closeAsync closes e's tunnel without waiting for the close handshake,
// which a half-dead peer can stretch to seconds.
func (r *Registry) closeAsync(e *entry, code websocket.StatusCode, reason string) {
	r.wg.Go(func() { closeStatus(e.conn, code, reason) })
}

// Get returns the machine's client connection, if it has a tunnel.
func (r *Registry) Get(machineID string) (*grpc.ClientConn, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.machines[machineID]
	if !ok {
		return nil, false
	}
	return e.cc, true
}

// Wait returns the machine's client connection, waiting for its tunnel to
// come up until ctx is done.
func (r *Registry) Wait(ctx context.Context, machineID string) (*grpc.ClientConn, error) {
	for {
		r.mu.Lock()
		e, ok := r.machines[machineID]
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return e.cc, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close closes the machine's tunnel at once (on revoke): the daemon sees a
// policy-violation close and its next attempt is checked afresh. It reports
// whether the machine had a tunnel.
func (r *Registry) Close(machineID string) bool {
	r.mu.Lock()
	e, ok := r.machines[machineID]
	r.mu.Unlock()
	if !ok {
		return false
	}
	r.log.Info("closing a machine's tunnel", zap.String("machine", machineID))
	r.closeAsync(e, websocket.StatusPolicyViolation, "machine revoked")
	return true
}

// Len is the number of machines with a live tunnel.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.machines)
}

// Tunnels lists the live tunnels by machine id.
func (r *Registry) Tunnels() []TunnelInfo {
	r.mu.Lock()
	out := make([]TunnelInfo, 0, len(r.machines))
	for _, e := range r.machines {
		out = append(out, e.TunnelInfo)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].MachineID < out[j].MachineID })
	return out
}

// Drain takes the machine offline at once while its tunnel stays up for
// the calls already running on it: the daemon said it is shutting down.
// Get no longer returns it and OnDown is called now; the tunnel is closed
// when the daemon closes it, or by CloseAll.
func (r *Registry) Drain(machineID string) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.mu.Lock()
	e, ok := r.machines[machineID]
	if ok {
		delete(r.machines, machineID)
		r.draining[e] = struct{}{}
		r.broadcastLocked()
	}
	r.mu.Unlock()
	if ok && r.opts.OnDown != nil {
		r.opts.OnDown(machineID)
	}
}

// CloseAll closes every tunnel (status going-away: daemons reconnect),
// refuses new ones and waits until all are gone.
func (r *Registry) CloseAll() {
	r.mu.Lock()
	r.closed = true
	all := make([]*entry, 0, len(r.machines)+len(r.draining))
	for _, e := range r.machines {
		all = append(all, e)
	}
	for e := range r.draining {
		all = append(all, e)
	}
	r.mu.Unlock()
	for _, e := range all {
		r.closeAsync(e, websocket.StatusGoingAway, "hub shutting down")
	}
	r.wg.Wait()
}

func (r *Registry) broadcastLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// watchedConn tells the registry when the tunnel under a gRPC connection
// ends: closed by anyone, or broken (a read or write error).
type watchedConn struct {
	net.Conn
	once  sync.Once
	onEnd func() // set by Add before the conn is used
}

func (w *watchedConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if err != nil {
		w.end()
	}
	return n, err
}

func (w *watchedConn) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if err != nil {
		w.end()
	}
	return n, err
}

func (w *watchedConn) Close() error {
	err := w.Conn.Close()
	w.end()
	return err
}

func (w *watchedConn) end() {
	w.once.Do(func() {
		if w.onEnd != nil {
			w.onEnd()
		}
	})
}

// closeStatus closes a tunnel conn telling the peer why, when it can.
func closeStatus(c net.Conn, code websocket.StatusCode, reason string) {
	if w, ok := c.(*watchedConn); ok {
		if sc, ok := w.Conn.(statusCloser); ok {
			sc.closeWith(code, reason)
		}
		w.Close()
		return
	}
	if sc, ok := c.(statusCloser); ok {
		sc.closeWith(code, reason)
		return
	}
	c.Close()
}
