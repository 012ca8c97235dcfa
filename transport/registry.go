package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/devdepot-ai/agentd/internal/bufpool"
)

// RegistryOptions configures a Registry. Zero fields get defaults in
// NewRegistry.
type RegistryOptions struct {
	// Logger receives the registry's logs, which NewRegistry names
	// "tunnels" under it. Default: a no-op logger.
	Logger *zap.Logger
	// OnUp is called when a machine's tunnel is added (also when it
	// replaces an older one).
	OnUp func(machineID string)
	// OnDown is called when a machine has no tunnel any more: it broke,
	// the daemon closed it, or Close revoked it; not when a newer tunnel
	// replaced it. OnUp and OnDown are called one at a time, in order; they
	// must return soon and must not call Add, Close or CloseAll.
	OnDown func(machineID string)
	// DialOptions are added to the options of the gRPC client connection
	// that carries every tunnel (interceptors, stats handlers…).
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

// Registry holds the hub's gRPC client side of every live tunnel: one
// ClientConn, with one SubConn (one HTTP/2 transport) per tunnel. Add is an
// Acceptor's OnTunnel.
type Registry struct {
	opts RegistryOptions
	log  *zap.Logger

	cc       *grpc.ClientConn
	bcc      balancer.ClientConn // the policy's; set before attached is closed
	attached chan struct{}
	attach1  sync.Once

	evMu sync.Mutex // orders Add, removals and the OnUp/OnDown calls

	mu       sync.Mutex
	machines map[string]*entry
	draining map[*entry]struct{}     // offline, their last calls finishing (see Drain)
	pending  map[string]*watchedConn // by SubConn address: tunnels not dialled yet
	lastAddr uint64
	changed  chan struct{} // closed and replaced on every change
	closed   bool
	wg       sync.WaitGroup // removals in flight
}

type entry struct {
	TunnelInfo
	addr string // the SubConn's address, unique per tunnel
	conn *watchedConn

	mu       sync.Mutex
	sc       balancer.SubConn
	state    connectivity.State
	wasReady bool
}

// NewRegistry returns an empty Registry.
func NewRegistry(opts RegistryOptions) (*Registry, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	r := &Registry{
		opts:     opts,
		log:      opts.Logger.Named("tunnels"),
		attached: make(chan struct{}),
		machines: make(map[string]*entry),
		draining: make(map[*entry]struct{}),
		pending:  make(map[string]*watchedConn),
		changed:  make(chan struct{}),
	}
	registerPolicy.Do(func() { balancer.Register(policyBuilder{}) })
	res := manual.NewBuilderWithScheme("agentd-tunnels")
	res.InitialState(resolver.State{
		Addresses:  []resolver.Address{{Addr: "tunnels"}},
		Attributes: attributes.New(registryKey{}, r),
	})
	dialOpts := append([]grpc.DialOption{
		grpc.WithResolvers(res),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"` + tunnelsPolicy + `": {}}]}`),
		grpc.WithContextDialer(r.dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()), // TLS is the websocket's
		grpc.WithIdleTimeout(0),
		grpc.WithReadBufferSize(opts.ReadBufferSize),
		experimental.WithBufferPool(bufpool.Shared()), // relayed bytes are not cleared first
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	}, opts.DialOptions...)
	cc, err := grpc.NewClient(res.Scheme()+":///tunnels", dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("tunnel client: %w", err)
	}
	r.cc = cc
	cc.Connect() // builds the policy, which attaches
	return r, nil
}

// attach is called by the policy once it is built.
func (r *Registry) attach(bcc balancer.ClientConn) {
	r.attach1.Do(func() {
		r.bcc = bcc
		bcc.UpdateState(balancer.State{ConnectivityState: connectivity.Ready, Picker: picker{}})
		close(r.attached)
	})
}

// dial hands a tunnel's connection to its SubConn, once.
func (r *Registry) dial(_ context.Context, addr string) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	wc, ok := r.pending[addr]
	if !ok {
		return nil, errTunnelUsed
	}
	delete(r.pending, addr)
	return wc, nil
}

// statusReplaced closes a tunnel that a newer one of the same machine
// replaced. Not going-away: the daemon's NetConn would read that as a
// plain EOF and lose the reason.
const statusReplaced websocket.StatusCode = 4000

var errTunnelUsed = errors.New("the tunnel is gone; the machine has to reconnect")

// attachTimeout bounds the wait for the client connection's policy, which
// is built moments after NewRegistry.
const attachTimeout = 10 * time.Second

// Add makes conn the machine's tunnel: a gRPC transport rides on it (the
// daemon is the server). An older tunnel of the same machine is closed.
// The registry owns conn from now on.
func (r *Registry) Add(machineID string, conn net.Conn, remote string) {
	wc := &watchedConn{Conn: conn}
	select {
	case <-r.attached:
	case <-time.After(attachTimeout):
		r.log.Error("the tunnels' gRPC client is not ready; dropping a tunnel", zap.String("machine", machineID))
		closeStatus(wc, websocket.StatusInternalError, "hub not ready")
		return
	}

	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		closeStatus(wc, websocket.StatusGoingAway, "hub shutting down")
		return
	}
	r.lastAddr++
	e := &entry{
		TunnelInfo: TunnelInfo{MachineID: machineID, Remote: remote, Since: time.Now()},
		addr:       "tunnel-" + strconv.FormatUint(r.lastAddr, 10),
		conn:       wc,
		state:      connectivity.Idle,
	}
	// Removal runs on its own goroutine, as the conn may end inside a gRPC
	// read. Set before anyone else can see wc.
	wc.onEnd = func() { go r.remove(e) }
	r.pending[e.addr] = wc
	old := r.machines[machineID]
	r.machines[machineID] = e
	r.wg.Add(1) // for remove(e)
	r.broadcastLocked()
	r.mu.Unlock()
	if old != nil {
		r.log.Info("machine reconnected; closing its older tunnel", zap.String("machine", machineID))
		r.closeAsync(old, statusReplaced, "replaced by a newer tunnel")
	}
	// NewSubConn is marked deprecated only to say that SubConns will take
	// one address each in the future; this one has one.
	//lint:ignore SA1019 one address per SubConn, as the notice asks
	sc, err := r.bcc.NewSubConn([]resolver.Address{{Addr: e.addr}}, balancer.NewSubConnOptions{
		StateListener: func(s balancer.SubConnState) { r.subConnState(e, s) },
	})
	if err != nil {
		r.log.Error("cannot make a gRPC transport for a tunnel", zap.String("machine", machineID), zap.Error(err))
		closeStatus(wc, websocket.StatusInternalError, "hub cannot serve the tunnel")
		return
	}
	e.mu.Lock()
	e.sc = sc
	e.mu.Unlock()
	sc.Connect()
	if r.opts.OnUp != nil {
		r.opts.OnUp(machineID)
	}
}

// subConnState records a tunnel transport's state and lets calls waiting
// for it pick again.
func (r *Registry) subConnState(e *entry, s balancer.SubConnState) {
	e.mu.Lock()
	e.state = s.ConnectivityState
	if e.state == connectivity.Ready {
		e.wasReady = true
	}
	e.mu.Unlock()
	r.bcc.UpdateState(balancer.State{ConnectivityState: connectivity.Ready, Picker: picker{}})
}

// remove forgets e once its tunnel has ended and shuts its transport down.
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
	delete(r.pending, e.addr)
	r.mu.Unlock()
	if current && r.opts.OnDown != nil {
		r.opts.OnDown(e.MachineID)
	}
	r.evMu.Unlock()
	e.mu.Lock()
	sc := e.sc
	e.mu.Unlock()
	if sc != nil {
		sc.Shutdown()
	}
	e.conn.Close()
}

// closeAsync closes e's tunnel without waiting for the close handshake,
// which a half-dead peer can stretch to seconds.
func (r *Registry) closeAsync(e *entry, code websocket.StatusCode, reason string) {
	r.wg.Go(func() { closeStatus(e.conn, code, reason) })
}

// Get returns the machine's tunnel, if it has one.
func (r *Registry) Get(machineID string) (MachineConn, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.machines[machineID]
	if !ok {
		return MachineConn{}, false
	}
	return MachineConn{cc: r.cc, e: e}, true
}

// Wait returns the machine's tunnel, waiting for it to come up until ctx
// is done.
func (r *Registry) Wait(ctx context.Context, machineID string) (MachineConn, error) {
	for {
		r.mu.Lock()
		e, ok := r.machines[machineID]
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return MachineConn{cc: r.cc, e: e}, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return MachineConn{}, ctx.Err()
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
	r.cc.Close()
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
