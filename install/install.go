// Package install registers agentd with the operating system's service
// manager, so that `agentd run` starts at login or boot, runs as the right
// account and restarts when it fails: a systemd user unit (or a system unit
// with User=) on Linux, a LaunchAgent (or LaunchDaemon) on macOS, a service
// of the Service Control Manager on Windows. It drives
// github.com/kardianos/service but supplies its own unit and plist, rendered
// from the templates embedded from templates/.
package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kardianos/service"

	"github.com/devdepot-ai/agentd/internal/config"
)

// Errors a caller can match with errors.Is.
var (
	// ErrNeedRoot: a system service is installed or controlled only by root.
	ErrNeedRoot = errors.New("a system service needs root: run it with sudo")
	// ErrRootUserService: root asked for a per-user service, which is almost
	// never meant (sudo without --system).
	ErrRootUserService = errors.New("running as root: to run agentd as a service for an account, use --system --user NAME; to run it as yourself, run agentd install without sudo")
	// ErrAlreadyInstalled: the service definition exists already.
	ErrAlreadyInstalled = errors.New("agentd is already installed as a service")
	// ErrNotInstalled: there is no service to uninstall, start or stop.
	ErrNotInstalled = errors.New("agentd is not installed as a service")
	// ErrAlreadyServing: an agentd outside the service manager already
	// serves the state dir the service would use.
	ErrAlreadyServing = errors.New("another agentd already serves this state dir")
	// ErrUnsupported: this system's service manager is not one agentd installs into.
	ErrUnsupported = errors.New("unsupported service manager")
)

// State is what the service manager says about the agentd service.
type State string

// States of the service.
const (
	StateNotInstalled State = "not installed"
	StateStopped      State = "stopped"
	StateRunning      State = "running"
	StateFailed       State = "failed" // stopped after failing; see the service manager's log
	StateUnknown      State = "unknown"
)

// Options says which service to manage. Zero fields get defaults from the
// running process and the OS in New.
type Options struct {
	System     bool   // a system service (needs root) running as User, not a per-user one
	User       string // account the system service runs as (--system only)
	Executable string // agentd binary the service runs (default: this one, symlinks resolved)
	ConfigDir  string // config dir to pin in the service's environment (default: none, the daemon's default)
	StateDir   string // state dir to pin in the service's environment (default: none)

	GOOS       string                                           // default runtime.GOOS
	Geteuid    func() int                                       // default os.Geteuid
	Home       string                                           // invoking user's home (default os.UserHomeDir)
	Username   string                                           // invoking user's name (default user.Current)
	LookupUser func(name string) (*user.User, error)            // default user.Lookup
	LingerDir  string                                           // default /var/lib/systemd/linger
	UnitDir    string                                           // systemd system units; default /etc/systemd/system, where kardianos writes them
	NewService func(c *service.Config) (service.Service, error) // default service.New
	Probe      func(socket string) bool                         // whether something answers on a unix socket
}

// Manager installs, controls and reports on one agentd service.
type Manager struct {
	o    Options
	spec Spec
	path string // where the definition lives; "" on Windows
	home string // home of the account the daemon runs as; "" when unknown
}

// New fills in the defaults and works out which service definition the
// options mean and where it lives. It changes nothing.
func New(o Options) (*Manager, error) {
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.Geteuid == nil {
		o.Geteuid = os.Geteuid
	}
	if o.LookupUser == nil {
		o.LookupUser = user.Lookup
	}
	if o.UnitDir == "" {
		o.UnitDir = "/etc/systemd/system"
	}
	if o.LingerDir == "" {
		o.LingerDir = "/var/lib/systemd/linger"
	}
	if o.NewService == nil {
		o.NewService = func(c *service.Config) (service.Service, error) { return service.New(program{}, c) }
	}
	if o.Probe == nil {
		o.Probe = probeSocket
	}
	if o.Home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no home directory: %w", err)
		}
		o.Home = h
	}
	if o.Username == "" {
		if u, err := user.Current(); err == nil {
			o.Username = u.Username
		}
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the agentd binary: %w", err)
		}
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		o.Executable = exe
	}
	if o.User != "" && !o.System {
		return nil, errors.New("--user NAME goes with --system (a per-user service runs as you)")
	}
	m := &Manager{o: o, home: o.Home}
	if o.System {
		m.home = "" // found in preflight, from --user
	}
	m.spec = Spec{Name: "agentd", Executable: o.Executable, User: o.User, ConfigDir: o.ConfigDir, StateDir: o.StateDir}
	switch o.GOOS {
	case "linux":
		m.spec.Kind = KindSystemdUser
		m.path = filepath.Join(o.Home, ".config", "systemd", "user", "agentd.service")
		if o.System {
			m.spec.Kind = KindSystemdSystem
			m.path = filepath.Join(o.UnitDir, "agentd.service")
		}
	case "darwin":
		m.spec.Kind, m.spec.Name = KindLaunchd, "ai.devdepot.agentd"
		m.path = filepath.Join(o.Home, "Library", "LaunchAgents", m.spec.Name+".plist")
		m.spec.LogPath = filepath.Join(o.Home, "Library", "Logs", "agentd.log")
		if o.System {
			m.path = "/Library/LaunchDaemons/" + m.spec.Name + ".plist"
			m.spec.LogPath = "/Library/Logs/agentd.log"
		}
	case "windows":
		m.spec.Kind = KindWindows
		// A service does not run in the installing user's profile, so it
		// would not find the pairing in the default dirs: pin them.
		if m.spec.ConfigDir == "" {
			if d, err := config.ConfigDir(); err == nil {
				m.spec.ConfigDir = d
			}
		}
		if m.spec.StateDir == "" {
			if d, err := config.StateDir(); err == nil {
				m.spec.StateDir = d
			}
		}
	default:
		return nil, fmt.Errorf("%w: agentd installs services on linux (systemd), darwin (launchd) and windows, not %s", ErrUnsupported, o.GOOS)
	}
	return m, nil
}

// Path is where the service definition is (or would be) installed; empty on
// Windows, where the service manager keeps it.
func (m *Manager) Path() string { return m.path }

// Kind is the kind of service definition (a Kind constant).
func (m *Manager) Kind() string { return m.spec.Kind }

// System reports whether this is a system service rather than a per-user one.
func (m *Manager) System() bool { return m.o.System }

// Definition renders the service definition Install would write.
func (m *Manager) Definition() ([]byte, error) {
	if m.o.System && m.o.User == "" && m.spec.Kind != KindWindows {
		return nil, errors.New("--system needs --user NAME: the account the service runs as")
	}
	return Render(m.spec)
}

// Installed reports whether the service definition exists.
func (m *Manager) Installed() bool {
	if m.path != "" {
		_, err := os.Stat(m.path)
		return err == nil
	}
	svc, err := m.service(nil)
	if err != nil {
		return false
	}
	_, err = svc.Status()
	return !errors.Is(err, service.ErrNotInstalled)
}

// Result is what Install did, for the caller to tell the user.
type Result struct {
	Path    string // where the definition was written ("" on Windows)
	Started bool   // the service was started
	// Linger is set for a systemd user service: whether the user manager
	// (and so agentd) keeps running when the user is logged out.
	Linger *bool
}

// Install checks that the service can work (root for --system, a readable
// pairing with private permissions, no other agentd on the state dir, not
// installed yet), writes and enables the definition and, if start, starts
// it. When it fails, it leaves nothing installed.
func (m *Manager) Install(ctx context.Context, start bool) (Result, error) {
	def, err := m.Definition()
	if err != nil {
		return Result{}, err
	}
	if err := m.preflight(); err != nil {
		return Result{}, err
	}
	if m.Installed() {
		return Result{}, m.alreadyInstalled()
	}
	if err := m.checkPairing(); err != nil {
		return Result{}, err
	}
	if err := m.checkNotServing(); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	svc, err := m.service(def)
	if err != nil {
		return Result{}, err
	}
	if m.spec.Kind == KindSystemdUser || m.spec.Kind == KindSystemdSystem {
		if p := svc.Platform(); p != "linux-systemd" {
			return Result{}, fmt.Errorf("%w: this system's init is %s; agentd installs only into systemd on Linux (run 'agentd install --print' to see the unit)", ErrUnsupported, p)
		}
	}
	if err := svc.Install(); err != nil {
		if m.path != "" {
			os.Remove(m.path) // kardianos writes the file before enabling it
		}
		return Result{}, fmt.Errorf("install %s: %w%s", m.describe(), err, m.busHint())
	}
	res := Result{Path: m.path}
	if m.spec.Kind == KindSystemdUser {
		on := m.Lingering()
		res.Linger = &on
	}
	if start {
		if err := svc.Start(); err != nil {
			return res, fmt.Errorf("installed %s, but it did not start: %w%s", m.describe(), err, m.logHint())
		}
		res.Started = true
	}
	return res, nil
}

// Uninstall stops the service and removes its definition.
func (m *Manager) Uninstall(ctx context.Context) error {
	if !m.Installed() {
		return m.notInstalled()
	}
	if err := m.preflight(); err != nil {
		return err
	}
	svc, err := m.service(nil)
	if err != nil {
		return err
	}
	_ = svc.Stop() // it may be stopped already; Uninstall says what matters
	if err := svc.Uninstall(); err != nil {
		return fmt.Errorf("uninstall %s: %w%s", m.describe(), err, m.busHint())
	}
	if m.path != "" {
		if _, err := os.Stat(m.path); err == nil {
			return fmt.Errorf("uninstall %s: %s is still there", m.describe(), m.path)
		}
	}
	return ctx.Err()
}

// Start starts the installed service.
func (m *Manager) Start(ctx context.Context) error {
	return m.control(ctx, "start", service.Service.Start)
}

// Stop stops the installed service; agentd shuts down gracefully.
func (m *Manager) Stop(ctx context.Context) error {
	return m.control(ctx, "stop", service.Service.Stop)
}

// Restart restarts the installed service.
func (m *Manager) Restart(ctx context.Context) error {
	return m.control(ctx, "restart", service.Service.Restart)
}

func (m *Manager) control(ctx context.Context, verb string, do func(service.Service) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !m.Installed() {
		return m.notInstalled()
	}
	if err := m.preflight(); err != nil {
		return err
	}
	svc, err := m.service(nil)
	if err != nil {
		return err
	}
	if err := do(svc); err != nil {
		return fmt.Errorf("%s %s: %w%s", verb, m.describe(), err, m.logHint())
	}
	return nil
}

// State asks the service manager whether the service runs.
func (m *Manager) State(ctx context.Context) (State, error) {
	if err := ctx.Err(); err != nil {
		return StateUnknown, err
	}
	if m.path != "" && !m.Installed() {
		return StateNotInstalled, nil
	}
	svc, err := m.service(nil)
	if err != nil {
		return StateUnknown, err
	}
	st, err := svc.Status()
	switch {
	case errors.Is(err, service.ErrNotInstalled):
		if m.path != "" {
			return StateStopped, nil // the file is there; the manager has not loaded it
		}
		return StateNotInstalled, nil
	case err != nil && strings.Contains(err.Error(), "failed state"):
		return StateFailed, nil
	case err != nil:
		return StateUnknown, fmt.Errorf("status of %s: %w%s", m.describe(), err, m.busHint())
	case st == service.StatusRunning:
		return StateRunning, nil
	case st == service.StatusStopped:
		return StateStopped, nil
	}
	return StateUnknown, nil
}

// Status reports the state of agentd's service on this machine: the
// per-user one if it is installed, else the system one.
func Status(ctx context.Context) (State, error) {
	for _, system := range []bool{false, true} {
		m, err := New(Options{System: system})
		if err != nil {
			return StateUnknown, err
		}
		if system || m.Installed() || m.path == "" {
			return m.State(ctx)
		}
	}
	return StateNotInstalled, nil
}

// Lingering reports whether systemd keeps the user's manager, and so a user
// service, running while the user is not logged in.
func (m *Manager) Lingering() bool {
	_, err := os.Stat(filepath.Join(m.o.LingerDir, m.o.Username))
	return err == nil
}

// LingerCommand is the command that turns lingering on for the invoking user.
func (m *Manager) LingerCommand() string {
	return "sudo loginctl enable-linger " + m.o.Username
}

func (m *Manager) preflight() error {
	if m.spec.Kind == KindWindows {
		return nil // the Service Control Manager says "access denied" itself
	}
	root := m.o.Geteuid() == 0
	if m.o.System && !root {
		return ErrNeedRoot
	}
	if !m.o.System && root {
		return ErrRootUserService
	}
	if m.o.System && m.o.User != "" {
		u, err := m.o.LookupUser(m.o.User)
		if err != nil {
			return fmt.Errorf("--user %s: no such account on this machine: %w", m.o.User, err)
		}
		m.home = u.HomeDir
	}
	return nil
}

// daemonDirs are the config and state dirs the service's agentd will use.
func (m *Manager) daemonDirs() (cfg, state string) {
	cfg, state = m.spec.ConfigDir, m.spec.StateDir
	if m.home == "" {
		return cfg, state
	}
	if cfg == "" {
		if m.spec.Kind == KindLaunchd {
			cfg = filepath.Join(m.home, "Library", "Application Support", "agentd")
		} else {
			cfg = filepath.Join(m.home, ".config", "agentd")
		}
	}
	if state == "" {
		state = filepath.Join(m.home, ".local", "state", "agentd")
	}
	return cfg, state
}

// checkPairing refuses to install a service that would exit at once: not
// paired, or a config dir others can read (agentd refuses to start then).
func (m *Manager) checkPairing() error {
	cfg, _ := m.daemonDirs()
	if cfg == "" {
		return nil
	}
	_, _, err := config.LoadMachine(cfg)
	switch {
	case errors.Is(err, config.ErrNotPaired):
		if m.o.System {
			return fmt.Errorf("not installing: the service would exit at once: %s has no pairing; pair as %s first: sudo -u %s agentd pair --hub URL --code XXXX-XXXX",
				cfg, m.o.User, m.o.User)
		}
		return fmt.Errorf("not installing: the service would exit at once: %w first (config dir %s)", err, cfg)
	case err != nil:
		return fmt.Errorf("not installing: the service would refuse to start: %w", err)
	}
	return nil
}

func (m *Manager) checkNotServing() error {
	_, state := m.daemonDirs()
	if state == "" {
		return nil
	}
	sock := filepath.Join(state, "agentd.sock")
	if m.o.Probe(sock) {
		return fmt.Errorf("%w: %s answers; stop that 'agentd run' (or 'agentd serve') first, then install", ErrAlreadyServing, sock)
	}
	return nil
}

func probeSocket(sock string) bool {
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != fs.ModeSocket {
		return false
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (m *Manager) service(def []byte) (service.Service, error) {
	c := &service.Config{
		Name:        m.spec.Name,
		DisplayName: displayName,
		Description: description,
		Executable:  m.o.Executable,
		Arguments:   []string{"run"},
		UserName:    m.o.User,
		EnvVars:     map[string]string{},
		Option: service.KeyValue{
			"UserService":            !m.o.System,
			"OnFailure":              "restart",
			"OnFailureDelayDuration": "2s",
			"StartType":              "automatic",
		},
	}
	for _, e := range m.spec.env() {
		c.EnvVars[e.Key] = e.Value
	}
	if def != nil {
		c.Option["SystemdScript"] = string(def)
		c.Option["LaunchdConfig"] = string(def)
	}
	svc, err := m.o.NewService(c)
	if err != nil {
		return nil, fmt.Errorf("service manager: %w", err)
	}
	return svc, nil
}

func (m *Manager) describe() string {
	switch m.spec.Kind {
	case KindSystemdUser:
		return "the systemd user service agentd.service"
	case KindSystemdSystem:
		return "the systemd service agentd.service"
	case KindLaunchd:
		if m.o.System {
			return "the LaunchDaemon " + m.spec.Name
		}
		return "the LaunchAgent " + m.spec.Name
	}
	return "the Windows service " + m.spec.Name
}

func (m *Manager) flag() string {
	if m.o.System {
		return " --system"
	}
	return ""
}

func (m *Manager) alreadyInstalled() error {
	where := ""
	if m.path != "" {
		where = " (" + m.path + ")"
	}
	return fmt.Errorf("%w%s: use 'agentd restart%s' to restart it, or 'agentd uninstall%s' first to install it anew",
		ErrAlreadyInstalled, where, m.flag(), m.flag())
}

func (m *Manager) notInstalled() error {
	where := ""
	if m.path != "" {
		where = " (no " + m.path + ")"
	}
	how := "agentd install"
	if m.o.System && m.spec.Kind != KindWindows {
		how = "sudo agentd install --system --user NAME"
	}
	return fmt.Errorf("%w%s: install it with '%s'", ErrNotInstalled, where, how)
}

func (m *Manager) busHint() string {
	if m.spec.Kind == KindSystemdUser {
		return " (systemctl --user needs your login session: run it as yourself in a normal login, not under sudo or su)"
	}
	return ""
}

func (m *Manager) logHint() string {
	switch m.spec.Kind {
	case KindSystemdUser:
		return "; see: journalctl --user -u agentd"
	case KindSystemdSystem:
		return "; see: journalctl -u agentd"
	case KindLaunchd:
		return "; see: " + m.spec.LogPath
	}
	return ""
}

const (
	displayName = "agentd"
	description = "agentd: execution environment for AI agents (tunnel to the paired hub)"
)

// program satisfies service.Interface; the service runs `agentd run`, so
// this process never runs as the service itself.
type program struct{}

func (program) Start(service.Service) error { return nil }
func (program) Stop(service.Service) error  { return nil }

var _ service.Interface = program{}
