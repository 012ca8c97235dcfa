package runner

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Options configures a Manager. Zero fields get defaults in New.
type Options struct {
	// Logger receives the runner's logs. Default: a no-op logger.
	Logger *zap.Logger
	// Env is the base environment of every command; a Spec's Env is merged
	// over it. AGENTD_* variables, and those describing the daemon's own
	// process (PWD, OLDPWD, _, NOTIFY_SOCKET, LISTEN_*), are removed from
	// it. Default: os.Environ().
	Env []string
	// Dir is the working directory of commands that name none, and what a
	// relative Spec.Dir is resolved against. Default: the home directory,
	// else "/".
	Dir string
	// Shell runs Spec.Command as `Shell -c Command` (on Windows, cmd.exe
	// runs it as `cmd.exe /d /s /c "Command"`). Default: DefaultShell().
	Shell string
	// DefaultGrace is the time between SIGTERM and SIGKILL when a Spec sets
	// none. Default: 5 s.
	DefaultGrace time.Duration
	// RetainHead and RetainTail are the bytes of each output stream kept
	// from its start and its end when a Spec sets none. Default: 1 MiB and
	// 4 MiB.
	RetainHead int64
	RetainTail int64
	// Linger is how long a finished process stays attachable. Default: 10 min.
	Linger time.Duration
	// StallTimeout is how long a live subscriber that reads nothing at all
	// may hold back a process's output (see Subscription) before it is
	// let go and later told of a Gap instead. Default: 1 min.
	StallTimeout time.Duration
	// DrainTimeout is how long, after a process's leader has exited, its
	// output is still read while nothing arrives: background processes
	// that keep the output open do not keep the process "running" past it.
	// Default: 1 s.
	DrainTimeout time.Duration
	// Now is the clock for start and end times and for Linger. Default:
	// time.Now.
	Now func() time.Time
	// ExtraEnv, when set, is called at each start for variables set over
	// Env, under the Spec's own: what arrives after the Manager was made
	// (a sandbox's secrets). AGENTD_* names it returns are dropped.
	ExtraEnv func() map[string]string
	// ChildOOMScoreAdj, when not 0, is set as the OOM score adjustment of
	// every command right after it starts (Linux): a sandbox's agentd makes
	// what it runs die first when memory runs out, so it survives.
	ChildOOMScoreAdj int
	// ReadOnlyRoot, when set, lets the Manager remember PATH lookups of
	// programs that resolve on the root filesystem without leaving it, for
	// as long as it runs (Linux): a sandbox's root is its image, mounted
	// read-only, and its processes cannot remount it. New checks that the
	// root is mounted read-only and caches nothing otherwise. Lookups
	// through any other mount (a tmpfs HOME, the workspace) are made on
	// every start as before.
	ReadOnlyRoot bool
}

// Manager starts processes and keeps track of them until they have
// finished and lingered. All its methods are safe for concurrent use.
type Manager struct {
	opts Options
	log  *zap.Logger
	env  []string   // cleaned base environment
	look *lookCache // nil unless opts.ReadOnlyRoot and the root is read-only

	// Opened once in New, used by every start, closed by Close once no
	// start is under way (starting): a start then walks no path from "/"
	// for them (on a sandbox's root, each walk is a round trip to the
	// storage driver).
	devNull   *os.File       // stdin of commands that take none; nil: os/exec opens it
	procDir   int            // /proc (Linux), for OOM scores; -1: none
	starting  sync.WaitGroup // starts under way
	closeOnce sync.Once

	wg sync.WaitGroup // one per process, done when it has finished

	mu     sync.Mutex
	procs  map[string]*Process
	seq    uint64
	closed bool
}

// New returns a Manager with the zero fields of opts defaulted.
//
// New marks every inherited file descriptor above stderr close-on-exec, so
// that no command inherits a descriptor of the daemon.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Dir == "" {
		opts.Dir = "/"
		if home, err := os.UserHomeDir(); err == nil {
			opts.Dir = home
		}
	}
	if opts.Shell == "" {
		opts.Shell = DefaultShell()
	}
	opts.DefaultGrace = cmp.Or(opts.DefaultGrace, 5*time.Second)
	opts.RetainHead = cmp.Or(opts.RetainHead, 1<<20)
	opts.RetainTail = cmp.Or(opts.RetainTail, 4<<20)
	opts.Linger = cmp.Or(opts.Linger, 10*time.Minute)
	opts.StallTimeout = cmp.Or(opts.StallTimeout, time.Minute)
	opts.DrainTimeout = cmp.Or(opts.DrainTimeout, time.Second)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cloexecInherited()
	m := &Manager{
		opts:    opts,
		log:     opts.Logger.Named("runner"),
		env:     CleanEnv(opts.Env),
		procs:   make(map[string]*Process),
		procDir: -1,
	}
	if f, err := os.Open(os.DevNull); err == nil {
		m.devNull = f
	}
	if opts.ChildOOMScoreAdj != 0 {
		m.procDir = openProcDir()
	}
	if opts.ReadOnlyRoot {
		m.look = newLookCache()
	}
	return m
}

// Start starts the command spec describes. ctx bounds only the start: the
// process lives on after ctx is done, until it exits or is signalled.
//
// Start's errors say in words meant for the agent what is wrong: a
// malformed spec, a working directory or program that does not exist, a
// program that cannot be executed, a Manager that is closed. (Inside this
// module they also carry a kind from internal/errs — invalid, not found,
// permission, unavailable — which the daemon maps to a gRPC status.)
func (m *Manager) Start(ctx context.Context, spec Spec) (*Process, error) {
	p, _, err := m.start(ctx, spec, nil)
	return p, err
}

// StartAttached is Start followed by Attach from offset 0, except that the
// subscription exists before the process writes its first byte: it
// receives every byte of output, however much there is. The subscription
// ends when ctx is done; the process does not.
func (m *Manager) StartAttached(ctx context.Context, spec Spec) (*Process, *Subscription, error) {
	return m.start(ctx, spec, ctx)
}

// Get describes the process id.
func (m *Manager) Get(id string) (Info, error) {
	p, err := m.Lookup(id)
	if err != nil {
		return Info{}, err
	}
	return p.Info(), nil
}

// Lookup returns the process id, or an error of kind NotFound.
func (m *Manager) Lookup(id string) (*Process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evictLocked()
	p, ok := m.procs[id]
	if !ok {
		return nil, errs.New(errs.NotFound, "no process %q: it never existed or finished more than %v ago", id, m.opts.Linger)
	}
	return p, nil
}

// List describes the running processes and those that finished less than
// Linger ago, oldest first.
func (m *Manager) List() []Info {
	m.mu.Lock()
	m.evictLocked()
	procs := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		procs = append(procs, p)
	}
	m.mu.Unlock()
	slices.SortFunc(procs, func(a, b *Process) int { return cmp.Compare(a.seq, b.seq) })
	infos := make([]Info, len(procs))
	for i, p := range procs {
		infos[i] = p.Info()
	}
	return infos
}

// Wait waits until the process id has finished, or ctx is done.
func (m *Manager) Wait(ctx context.Context, id string) (Info, error) {
	p, err := m.Lookup(id)
	if err != nil {
		return Info{}, err
	}
	if _, err := p.Wait(ctx); err != nil {
		return Info{}, err
	}
	return p.Info(), nil
}

// Attach subscribes to the events of process id, replaying its retained
// output from the offsets in from. See Subscription.
func (m *Manager) Attach(ctx context.Context, id string, from Offsets) (*Subscription, error) {
	p, err := m.Lookup(id)
	if err != nil {
		return nil, err
	}
	return p.Attach(ctx, from)
}

// Signal sends sig to the process group of process id; see Process.Signal.
func (m *Manager) Signal(id string, sig syscall.Signal, grace time.Duration) error {
	p, err := m.Lookup(id)
	if err != nil {
		return err
	}
	return p.Signal(sig, grace)
}

// Input writes data to the stdin of process id; see Process.Input.
func (m *Manager) Input(ctx context.Context, id string, data []byte) error {
	p, err := m.Lookup(id)
	if err != nil {
		return err
	}
	return p.Input(ctx, data)
}

// CloseInput closes the stdin of process id; see Process.CloseInput.
func (m *Manager) CloseInput(ctx context.Context, id string) error {
	p, err := m.Lookup(id)
	if err != nil {
		return err
	}
	return p.CloseInput(ctx)
}

// Resize changes the pty size of process id; see Process.Resize.
func (m *Manager) Resize(id string, size PtySize) error {
	p, err := m.Lookup(id)
	if err != nil {
		return err
	}
	return p.Resize(size)
}

// Close shuts the Manager down: it sends SIGTERM to every running process
// group, SIGKILL to those still alive after their grace period, and waits
// until all have finished. When ctx is done first, every group is killed at
// once and Close returns ctx's error after they have finished. Start fails
// after Close.
func (m *Manager) Close(ctx context.Context) error {
	defer m.closeFiles()
	m.mu.Lock()
	m.closed = true
	procs := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		procs = append(procs, p)
	}
	m.mu.Unlock()

	for _, p := range procs {
		p.shutdown()
	}
	all := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(all)
	}()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
	}
	for _, p := range procs {
		_ = p.Signal(syscall.SIGKILL, 0)
	}
	<-all
	return ctx.Err()
}

// closeFiles closes the files every start shares, once no start is under
// way (none begins after Close).
func (m *Manager) closeFiles() {
	m.closeOnce.Do(func() {
		m.starting.Wait()
		if m.devNull != nil {
			m.devNull.Close()
		}
		closeProcDir(m.procDir)
	})
}

// evictLocked forgets processes that finished more than Linger ago.
func (m *Manager) evictLocked() {
	now := m.opts.Now()
	for id, p := range m.procs {
		if end, ok := p.endTime(); ok && now.Sub(end) > m.opts.Linger {
			delete(m.procs, id)
		}
	}
}

// register gives p a fresh id and adds it to the table, counting it in
// m.wg. It reports false when the Manager was closed meanwhile.
func (m *Manager) register(p *Process) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	for {
		p.id = newID()
		if _, taken := m.procs[p.id]; !taken {
			break
		}
	}
	m.seq++
	p.seq = m.seq
	m.procs[p.id] = p
	m.wg.Add(1)
	return true
}

var errClosed = errs.New(errs.Unavailable, "the daemon is shutting down and starts no more commands")

func newID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "p-" + hex.EncodeToString(b[:])
}
