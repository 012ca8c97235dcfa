package pyrun

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/runner"
)

// MaxCodeBytes is the largest source a run accepts.
const MaxCodeBytes = 10 << 20

// Defaults of Options.
const (
	DefaultPython         = "python3"
	DefaultIdleTimeout    = 30 * time.Minute
	DefaultInterruptGrace = 2 * time.Second
)

var sessionName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Options configures a Manager. Zero fields get defaults in New.
type Options struct {
	// Python is the interpreter: a program name looked up on the PATH of
	// Env when interpreters start, or a path. Default "python3".
	Python string
	// Env is the base environment of the interpreters; AGENTD_* variables
	// are dropped from it. Default: the daemon's environment.
	Env []string
	// Workspace is where runs start and what relative cwds are resolved
	// against. Default: the daemon's working directory.
	Workspace string
	// ChildOOMScoreAdj, when not 0, is set as the OOM score adjustment of
	// every interpreter right after it starts (see runner.Options).
	ChildOOMScoreAdj int
	// IdleTimeout ends a session that has not run code for this long.
	// Default 30 min; negative: sessions never expire.
	IdleTimeout time.Duration
	// InterruptGrace is how long a run has after its KeyboardInterrupt to
	// stop before its interpreter is killed. Default 2 s.
	InterruptGrace time.Duration
	// Logger receives the manager's logs. Default: a no-op logger.
	Logger *zap.Logger
	// Now returns the current time (idle expiry, session times). Default time.Now.
	Now func() time.Time
}

// RunSpec is the code to run and where.
type RunSpec struct {
	// Code is the Python source; a trailing expression's repr is returned.
	Code string
	// Session names a persistent interpreter, created on first use; empty
	// runs the code in a fresh interpreter that ends with the run.
	Session string
	// Timeout interrupts the run after this long (0: no timeout).
	Timeout time.Duration
	// Cwd is the directory to run in, absolute or relative to the
	// workspace. Empty: the workspace for a one-off run; for a session,
	// wherever the previous run left it (the workspace at first).
	Cwd string
	// Env sets variables over the base environment; in a session they are
	// applied to os.environ before the run and stay set.
	Env map[string]string
}

// SessionInfo describes a live session.
type SessionInfo struct {
	Name     string
	Pid      int
	Created  time.Time
	LastUsed time.Time
	Runs     int64
	Busy     bool
}

// Package is a Python distribution installed for the interpreter.
type Package struct {
	Name    string
	Version string
}

// Manager runs Python code: one-off runs and named sessions. It is safe for
// concurrent use; Shutdown ends it.
type Manager struct {
	opts Options
	log  *zap.Logger
	env  []string // base environment, cleaned

	mu       sync.Mutex
	sessions map[string]*session   // named sessions, by name
	live     map[*session]struct{} // every started interpreter, named or not
	closed   bool
	calls    sync.WaitGroup // Run and Packages calls in progress

	stopJanitor chan struct{}
	janitorDone chan struct{}
}

// New returns a Manager with the defaults filled into opts. It starts a
// goroutine that expires idle sessions; Shutdown stops it.
func New(opts Options) *Manager {
	if opts.Python == "" {
		opts.Python = DefaultPython
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Workspace == "" {
		if wd, err := os.Getwd(); err == nil {
			opts.Workspace = wd
		} else {
			opts.Workspace = "/"
		}
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.InterruptGrace <= 0 {
		opts.InterruptGrace = DefaultInterruptGrace
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Manager{
		opts:        opts,
		log:         opts.Logger,
		env:         runner.CleanEnv(opts.Env),
		sessions:    map[string]*session{},
		live:        map[*session]struct{}{},
		stopJanitor: make(chan struct{}),
		janitorDone: make(chan struct{}),
	}
	go m.janitor()
	return m
}

// ValidSessionName reports whether name can name a session: 1 to 64
// characters from A-Z, a-z, 0-9, '_', '.' and '-'.
func ValidSessionName(name string) bool { return sessionName.MatchString(name) }

func checkSessionName(name string) error {
	if !ValidSessionName(name) {
		if len(name) > 64 {
			return errs.New(errs.Invalid, "session name of %d characters: use 1 to 64 characters from A-Z a-z 0-9 _ . -", len(name))
		}
		return errs.New(errs.Invalid, "invalid session name %q: use 1 to 64 characters from A-Z a-z 0-9 _ . -", name)
	}
	return nil
}

// Run runs spec.Code and passes its events to emit, ending with Done. It
// returns an error, and emits nothing, when the request is wrong (invalid
// session name, code too large, cwd missing), the session is busy, or no
// interpreter can be started; after the first event it returns only the
// error of emit, if any.
func (m *Manager) Run(ctx context.Context, spec RunSpec, emit func(Event) error) error {
	if len(spec.Code) > MaxCodeBytes {
		return errs.New(errs.Invalid, "code is %d bytes; the limit is %d MiB (put large data in a file and read it from the code)", len(spec.Code), MaxCodeBytes>>20)
	}
	if spec.Timeout < 0 {
		return errs.New(errs.Invalid, "timeout %s is negative", spec.Timeout)
	}
	if spec.Session != "" {
		if err := checkSessionName(spec.Session); err != nil {
			return err
		}
	}
	if err := validateEnv(spec.Env); err != nil {
		return err
	}
	cwd := ""
	if spec.Cwd != "" || spec.Session == "" {
		var err error
		if cwd, err = m.resolveDir(spec.Cwd); err != nil {
			return err
		}
	}
	python, err := lookPath(m.opts.Python, m.env)
	if err != nil {
		return err
	}
	p := runParams{
		req:     request{Op: "run", Code: spec.Code, Cwd: cwd, Env: spec.Env},
		timeout: spec.Timeout,
		grace:   m.opts.InterruptGrace,
	}
	if spec.Session == "" {
		return m.runOneOff(ctx, python, cwd, spec.Env, p, emit)
	}

	s, fresh, err := m.acquire(spec.Session)
	if err != nil {
		return err
	}
	defer m.calls.Done()
	if fresh {
		dir := cwd
		if dir == "" {
			dir = m.opts.Workspace
		}
		if err := m.launch(ctx, s, python, dir, spec.Env); err != nil {
			return err
		}
	}
	m.mu.Lock()
	s.runs++
	p.req.Seq = s.runs
	m.mu.Unlock()
	alive, err := s.run(ctx, p, emit)
	m.release(s, alive)
	return err
}

func (m *Manager) runOneOff(ctx context.Context, python, cwd string, env map[string]string, p runParams, emit func(Event) error) error {
	s, err := m.acquireOneOff()
	if err != nil {
		return err
	}
	defer m.calls.Done()
	if err := m.launch(ctx, s, python, cwd, env); err != nil {
		return err
	}
	defer m.forget(s)
	p.oneOff = true
	p.req.Env = nil // already in the process's environment
	p.req.Seq = 1
	_, err = s.run(ctx, p, emit)
	return err
}

// acquire returns the named session marked busy, creating it (not yet
// launched: fresh) when there is none. A busy session is an error.
func (m *Manager) acquire(name string) (s *session, fresh bool, err error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, false, errs.New(errs.Unavailable, "python: agentd is shutting down")
	}
	var stale *session
	s = m.sessions[name]
	if s != nil && !s.busy && s.dead() {
		// Its interpreter ended between runs (a thread of the code exited it).
		delete(m.sessions, name)
		stale, s = s, nil
	}
	if s != nil {
		if s.busy {
			m.mu.Unlock()
			return nil, false, errs.New(errs.Precondition, "session %s is busy: another run is in progress (wait for it, or close the session)", name)
		}
		s.busy = true
		m.calls.Add(1)
		m.mu.Unlock()
		return s, false, nil
	}
	s = newSession(name, m.log.With(zap.String("session", name)), m.opts.Now())
	s.oomAdj = m.opts.ChildOOMScoreAdj
	s.busy = true
	m.sessions[name] = s
	m.calls.Add(1)
	m.mu.Unlock()
	if stale != nil {
		m.log.Info("python session ended on its own between runs; starting a fresh one", zap.String("session", name))
		m.forget(stale)
	}
	return s, true, nil
}

func (m *Manager) acquireOneOff() (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errs.New(errs.Unavailable, "python: agentd is shutting down")
	}
	m.calls.Add(1)
	s := newSession("", m.log, m.opts.Now())
	s.oomAdj = m.opts.ChildOOMScoreAdj
	return s, nil
}

// launch starts s's interpreter. On error s is gone (and out of the map).
func (m *Manager) launch(ctx context.Context, s *session, python, dir string, extra map[string]string) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.remove(s)
		return errs.New(errs.Unavailable, "python: agentd is shutting down")
	}
	m.live[s] = struct{}{}
	m.mu.Unlock()
	if err := s.launch(ctx, python, dir, runner.MergeEnv(m.env, extra)); err != nil {
		m.forget(s)
		return err
	}
	m.mu.Lock()
	s.pid = s.cmd.Process.Pid
	m.mu.Unlock()
	return nil
}

// release marks s idle after a run; a session that died, or was closed
// during the run, is stopped.
func (m *Manager) release(s *session, alive bool) {
	m.mu.Lock()
	s.busy = false
	s.lastUsed = m.opts.Now()
	current := m.sessions[s.name] == s
	m.mu.Unlock()
	if !alive || !current {
		m.forget(s)
	}
}

// remove takes s out of the manager's maps.
func (m *Manager) remove(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.name != "" && m.sessions[s.name] == s {
		delete(m.sessions, s.name)
	}
	delete(m.live, s)
}

// forget stops s and takes it out of the manager.
func (m *Manager) forget(s *session) {
	s.stop()
	m.remove(s)
}

// Reset restarts the named session's interpreter, clearing its globals. A
// run in progress in it is killed.
func (m *Manager) Reset(ctx context.Context, name string) error {
	if err := m.Close(name); err != nil {
		return err
	}
	python, err := lookPath(m.opts.Python, m.env)
	if err != nil {
		return err
	}
	s, fresh, err := m.acquire(name)
	if err != nil {
		if errs.KindOf(err) == errs.Precondition {
			return nil // a run created it anew meanwhile
		}
		return err
	}
	defer m.calls.Done()
	if fresh {
		if err := m.launch(ctx, s, python, m.opts.Workspace, nil); err != nil {
			return err
		}
	}
	m.release(s, true)
	return nil
}

// Close ends the named session and its interpreter (with its whole process
// group). A run in progress in it is killed.
func (m *Manager) Close(name string) error {
	if err := checkSessionName(name); err != nil {
		return err
	}
	m.mu.Lock()
	s := m.sessions[name]
	if s == nil {
		m.mu.Unlock()
		return errs.New(errs.NotFound, "no python session %q (ListSessions shows the live ones)", name)
	}
	delete(m.sessions, name)
	busy := s.busy
	m.mu.Unlock()
	if busy {
		// The run notices, reports the kill, and stops the session.
		s.kill("the session was closed or reset during the run")
		return nil
	}
	m.forget(s)
	return nil
}

// List returns the live sessions, sorted by name.
func (m *Manager) List() []SessionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SessionInfo, 0, len(m.sessions))
	for _, s := range m.sessions {
		if s.pid == 0 || (s.dead() && !s.busy) {
			continue // starting, or gone
		}
		out = append(out, SessionInfo{Name: s.name, Pid: s.pid, Created: s.created, LastUsed: s.lastUsed, Runs: s.runs, Busy: s.busy})
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Packages lists the distributions installed for the interpreter, sorted
// by name, through importlib.metadata in a one-off interpreter.
func (m *Manager) Packages(ctx context.Context) ([]Package, error) {
	python, err := lookPath(m.opts.Python, m.env)
	if err != nil {
		return nil, err
	}
	s, err := m.acquireOneOff()
	if err != nil {
		return nil, err
	}
	defer m.calls.Done()
	if err := m.launch(ctx, s, python, m.opts.Workspace, nil); err != nil {
		return nil, err
	}
	defer m.forget(s)
	frame, err := encodeRequest(request{Op: "packages"})
	if err != nil {
		return nil, err
	}
	if err := s.write(frame); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "python packages")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		select {
		case r, ok := <-s.replies:
			if !ok {
				return nil, errs.New(errs.Unavailable, "python packages: the interpreter ended before answering")
			}
			if r.Ev != "packages" {
				continue
			}
			out := make([]Package, 0, len(r.Packages))
			for _, p := range r.Packages {
				out = append(out, Package{Name: p[0], Version: p[1]})
			}
			return out, nil
		case <-s.leaderExited:
			return nil, errs.New(errs.Unavailable, "python packages: the interpreter ended before answering")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Shutdown ends every interpreter (killing runs in progress), stops the
// expiry of idle sessions, and waits for the calls in progress to return,
// until ctx is done.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var busy, idle []*session
	for s := range m.live {
		if s.busy || s.name == "" {
			busy = append(busy, s) // the call that runs it stops it
		} else {
			idle = append(idle, s)
		}
	}
	clear(m.sessions)
	m.mu.Unlock()
	close(m.stopJanitor)
	<-m.janitorDone

	for _, s := range busy {
		s.kill("agentd is shutting down")
	}
	for _, s := range idle {
		m.forget(s)
	}
	done := make(chan struct{})
	go func() {
		m.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// janitor expires idle sessions until Shutdown.
func (m *Manager) janitor() {
	defer close(m.janitorDone)
	if m.opts.IdleTimeout < 0 {
		<-m.stopJanitor
		return
	}
	interval := min(max(m.opts.IdleTimeout/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-m.stopJanitor:
			return
		case <-t.C:
			m.expire()
		}
	}
}

// expire stops sessions idle for IdleTimeout or more, and sessions whose
// interpreter ended between runs.
func (m *Manager) expire() {
	now := m.opts.Now()
	type victim struct {
		s    *session
		idle time.Duration
	}
	var victims []victim
	m.mu.Lock()
	for name, s := range m.sessions {
		if s.busy || s.pid == 0 {
			continue
		}
		if idle := now.Sub(s.lastUsed); idle >= m.opts.IdleTimeout || s.dead() {
			delete(m.sessions, name)
			victims = append(victims, victim{s, idle})
		}
	}
	m.mu.Unlock()
	for _, v := range victims {
		v.s.log.Info("python session ended after being idle", zap.Duration("idle", v.idle))
		m.forget(v.s)
	}
}

// resolveDir resolves a run's directory against the workspace and checks it.
func (m *Manager) resolveDir(dir string) (string, error) {
	if dir == "" {
		return m.opts.Workspace, nil
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return "", errs.New(errs.Invalid, "cwd contains a NUL byte")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(m.opts.Workspace, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return "", errs.New(errs.NotFound, "cwd %s does not exist", dir)
		}
		return "", errs.Wrap(errs.KindOf(err), err, "cwd")
	}
	if !fi.IsDir() {
		return "", errs.New(errs.Precondition, "cwd %s is not a directory", dir)
	}
	return filepath.Clean(dir), nil
}
