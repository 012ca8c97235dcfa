package sandboxes

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// BuiltinEnvironment is the name of the environment every org has.
const BuiltinEnvironment = "builtin"

// envSpec is what a sandbox of an environment runs.
type envSpec struct {
	name    string
	image   string // pinned digest or the base image
	network string // "public" or "none"
	// isolation is "runc" or "gvisor" ("": runc).
	isolation string
	// An agent run's: its limits (nil: the hub's) and its lifetime from
	// creation (zero: until idle).
	limits *sandbox.Limits
	ttl    time.Duration
	home   string // HOME in the workspace ("": the sandbox's tmpfs)
	// workspaceMax is the environment's own /workspace size (0: the hub's).
	workspaceMax int64
	// allow, with network "none", is the only way out: the egress proxy
	// to these destinations (empty: no proxy).
	allow allowlist.List
	// An agent run's: whether its resolved secrets go into it (then only
	// admins and the token that started it may call it: the hub's
	// sandboxAccess).
	secrets bool
	// An agent run's: the headers the egress proxy sets for it (brokered
	// credentials) and the variables it gets (their placeholders).
	inject []egressproxy.Inject
	rules  []BrokerRule
	env    []string
}

// Manager runs an org's sandboxes: get-or-create per (org, environment,
// conversation), the warm pool, the idle reaper, finding them again after
// a restart, the validation of custom images, and the unix socket the
// sandboxes dial (their tunnels and their egress proxy).
type Manager struct {
	o   Options
	log *zap.Logger

	privSync sync.Mutex // serialises syncPrivate

	// ctx lives until Close; the background work runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	sock   *socket // nil until Start
	// tunnelCAPEM is the certificate of the TCP listener's CA, set by
	// Start (nil without the listener).
	tunnelCAPEM []byte

	mu       sync.Mutex
	starting map[string]*startOp  // org/env/conversation → creation in flight
	active   map[string]int       // sandbox id → calls in flight
	used     map[string]time.Time // sandbox id → last call (stored at most once a minute)
	stored   map[string]time.Time // sandbox id → last stored use
	filling  map[string]int       // org/env → warm sandboxes being made
	// quota is held while a sandbox is counted against the caps and
	// recorded (admit), so that concurrent calls cannot both pass.
	quota   sync.Mutex
	baseInv map[string]*Inventory // base image → its inventory
	jobs    map[string]context.CancelFunc
	egress  map[string]egressGrant   // sandbox id → its allow list, once asked
	trans   map[string]*sync.Mutex   // sandbox id → held while it changes state
	stops   map[string]stopMark      // sandbox id → its last stop here
	samples map[string]sandbox.Stats // sandbox id → its last Usage sample
	cpu     cpuCount                 // CPU seconds per org, for /metrics
	// found is set while reconcile has succeeded since the last container
	// that could not be removed: until then, the reaper's ticks reconcile
	// again (the engine may be down for a while).
	found bool
	// baseID is the built-in image's id as last asked (at baseAt).
	baseID string
	baseAt time.Time
	rts    runtimes // the engine's, as last read
	wg     sync.WaitGroup

	closeOnce sync.Once
}

type startOp struct {
	done chan struct{}
	id   string
	err  error
}

// New makes the manager of o's sandboxes. Start serves their socket and
// starts the background work; Close stops it, Wait waits for it.
func New(o Options) (*Manager, error) {
	o.defaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	m := &Manager{
		o: o, log: o.Logger.Named("sandbox"),
		starting: map[string]*startOp{}, active: map[string]int{}, used: map[string]time.Time{},
		stored: map[string]time.Time{}, filling: map[string]int{}, baseInv: map[string]*Inventory{},
		jobs: map[string]context.CancelFunc{}, egress: map[string]egressGrant{}, trans: map[string]*sync.Mutex{}, stops: map[string]stopMark{},
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// Start serves the sandboxes' unix socket, finds the sandboxes of an
// earlier run again, and starts the reaper and unfinished validations.
// ctx bounds the finding again.
func (m *Manager) Start(ctx context.Context) error {
	sock, err := m.listen()
	if err != nil {
		return err
	}
	m.sock = sock
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		sock.serve()
	}()
	if err := m.reconcile(ctx); err != nil {
		m.o.Logger.Warn("finding sandboxes again", zap.Error(err))
	}
	m.logRuntimes(ctx)
	m.goFn(m.run)
	m.resumeValidations(ctx)
	return nil
}

// Options returns the manager's options, defaults filled in.
func (m *Manager) Options() Options { return m.o }

// Close stops the socket and the background work (the reaper, the warm
// pool's fills, validations); Wait waits for them to end. Close may be
// called more than once.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		m.cancel()
		if m.sock != nil {
			m.sock.close()
		} else if m.o.TunnelListener != nil {
			_ = m.o.TunnelListener.Close()
		}
	})
}

// Wait waits for the background work to end (after Close).
func (m *Manager) Wait() { m.wg.Wait() }

// goFn runs fn in a goroutine Wait waits for.
func (m *Manager) goFn(fn func(ctx context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn(m.ctx)
	}()
}
