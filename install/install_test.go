package install

import (
	"context"
	"errors"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kardianos/service"

	"github.com/devdepot-ai/agentd/internal/config"
)

// fakeService stands in for kardianos's systemd service: it writes and
// removes the unit file like the real one, without systemctl.
type fakeService struct {
	mu         sync.Mutex
	path       string
	cfg        *service.Config
	platform   string
	running    bool
	failed     bool
	installErr error // returned by Install after the file is written
	calls      []string
}

var _ service.Service = (*fakeService)(nil)

func (f *fakeService) call(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeService) Run() error { return nil }
func (f *fakeService) Start() error {
	f.call("start")
	f.running = true
	return nil
}
func (f *fakeService) Stop() error {
	f.call("stop")
	f.running = false
	return nil
}
func (f *fakeService) Restart() error { f.call("restart"); f.running = true; return nil }
func (f *fakeService) Install() error {
	f.call("install")
	if _, err := os.Stat(f.path); err == nil {
		return errors.New("Init already exists: " + f.path)
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(f.path, []byte(f.cfg.Option["SystemdScript"].(string)), 0o644); err != nil {
		return err
	}
	return f.installErr
}
func (f *fakeService) Uninstall() error {
	f.call("uninstall")
	return os.Remove(f.path)
}
func (f *fakeService) Logger(chan<- error) (service.Logger, error)       { return nil, nil }
func (f *fakeService) SystemLogger(chan<- error) (service.Logger, error) { return nil, nil }
func (f *fakeService) String() string                                    { return f.cfg.Name }
func (f *fakeService) Platform() string                                  { return f.platform }
func (f *fakeService) Status() (service.Status, error) {
	if _, err := os.Stat(f.path); err != nil {
		return service.StatusUnknown, service.ErrNotInstalled
	}
	switch {
	case f.failed:
		return service.StatusUnknown, errors.New("service in failed state")
	case f.running:
		return service.StatusRunning, nil
	}
	return service.StatusStopped, nil
}

type env struct {
	home, linger string
	euid         int
	svc          *fakeService
	serving      bool
}

// newEnv is a home dir, paired unless told otherwise, and a fake service manager.
func newEnv(t *testing.T, paired bool) *env {
	t.Helper()
	e := &env{home: t.TempDir(), linger: t.TempDir(), euid: 1000, svc: &fakeService{platform: "linux-systemd"}}
	if paired {
		key, err := config.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		m := config.Machine{Hub: "https://hub.example.com", MachineID: "m-1", Org: "o"}
		if err := config.SaveMachine(filepath.Join(e.home, ".config", "agentd"), m, key); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) options(o Options) Options {
	o.GOOS = "linux"
	o.Home = e.home
	o.Username = "ann"
	o.Executable = "/usr/bin/agentd"
	o.Geteuid = func() int { return e.euid }
	o.LingerDir = e.linger
	o.UnitDir = filepath.Join(e.home, "etc-systemd-system")
	o.LookupUser = func(name string) (*user.User, error) {
		if name != "build" {
			return nil, user.UnknownUserError(name)
		}
		return &user.User{Username: "build", HomeDir: e.home}, nil
	}
	o.NewService = func(c *service.Config) (service.Service, error) {
		e.svc.cfg = c
		if e.svc.path == "" {
			if c.Option["UserService"] == true {
				e.svc.path = filepath.Join(e.home, ".config", "systemd", "user", c.Name+".service")
			} else {
				e.svc.path = filepath.Join(e.home, "etc-systemd-system", c.Name+".service")
			}
		}
		return e.svc, nil
	}
	o.Probe = func(string) bool { return e.serving }
	return o
}

func (e *env) manager(t *testing.T, o Options) *Manager {
	t.Helper()
	m, err := New(e.options(o))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestInstallUserService(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	m := e.manager(t, Options{})
	if st, err := m.State(t.Context()); err != nil || st != StateNotInstalled {
		t.Fatalf("State before install = %v, %v; want %v", st, err, StateNotInstalled)
	}
	res, err := m.Install(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Started || res.Path != m.Path() || res.Linger == nil || *res.Linger {
		t.Errorf("Install = %+v, want started, path %s, linger off", res, m.Path())
	}
	if got, want := m.LingerCommand(), "sudo loginctl enable-linger ann"; got != want {
		t.Errorf("LingerCommand = %q, want %q", got, want)
	}
	written, err := os.ReadFile(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	def, _ := m.Definition()
	if string(written) != string(def) {
		t.Errorf("installed unit differs from --print:\n%s\nvs\n%s", written, def)
	}
	if e.svc.cfg.Option["UserService"] != true {
		t.Errorf("kardianos config UserService = %v, want true", e.svc.cfg.Option["UserService"])
	}
	if st, _ := m.State(t.Context()); st != StateRunning {
		t.Errorf("State = %v, want running", st)
	}

	_, err = m.Install(t.Context(), true)
	if !errors.Is(err, ErrAlreadyInstalled) || !strings.Contains(err.Error(), "agentd restart") {
		t.Errorf("second Install: %v, want ErrAlreadyInstalled naming restart", err)
	}

	for _, do := range []func() error{
		func() error { return m.Stop(t.Context()) },
		func() error { return m.Start(t.Context()) },
		func() error { return m.Restart(t.Context()) },
	} {
		if err := do(); err != nil {
			t.Fatal(err)
		}
	}
	e.svc.failed = true
	if st, _ := m.State(t.Context()); st != StateFailed {
		t.Errorf("State = %v, want failed", st)
	}
	e.svc.failed = false

	if err := m.Uninstall(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit still there after Uninstall: %v", err)
	}
	if err := m.Uninstall(t.Context()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("second Uninstall: %v, want ErrNotInstalled", err)
	}
	if err := m.Start(t.Context()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Start when not installed: %v, want ErrNotInstalled", err)
	}
	want := "install start stop start restart stop uninstall"
	if got := strings.Join(e.svc.calls, " "); got != want {
		t.Errorf("service calls = %s, want %s", got, want)
	}
}

func TestInstallLingerOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	if err := os.WriteFile(filepath.Join(e.linger, "ann"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.manager(t, Options{}).Install(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Started || res.Linger == nil || !*res.Linger {
		t.Errorf("Install(no start) = %+v, want not started, linger on", res)
	}
}

func TestInstallSystemService(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.euid = 0
	m := e.manager(t, Options{System: true, User: "build"})
	res, err := m.Install(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Linger != nil {
		t.Errorf("Linger reported for a system service")
	}
	if c := e.svc.cfg; c.UserName != "build" || c.Option["UserService"] != false {
		t.Errorf("kardianos config UserName %q UserService %v, want build, false", c.UserName, c.Option["UserService"])
	}
	b, _ := os.ReadFile(e.svc.path)
	if !strings.Contains(string(b), "\nUser=build\n") {
		t.Errorf("unit has no User=build:\n%s", b)
	}
}

// TestRefusals: each bad input fails with a clear error and installs nothing.
func TestRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		paired  bool
		setup   func(t *testing.T, e *env)
		opts    Options
		is      error
		mention string
	}{
		{name: "system without root", paired: true, opts: Options{System: true, User: "build"}, is: ErrNeedRoot, mention: "sudo"},
		{name: "user service as root", paired: true, setup: func(_ *testing.T, e *env) { e.euid = 0 }, is: ErrRootUserService, mention: "--system --user NAME"},
		{name: "unknown account", paired: true, setup: func(_ *testing.T, e *env) { e.euid = 0 }, opts: Options{System: true, User: "nobody-here"}, mention: "no such account"},
		{name: "system without user", paired: true, setup: func(_ *testing.T, e *env) { e.euid = 0 }, opts: Options{System: true}, mention: "--user NAME"},
		{name: "not paired", paired: false, is: config.ErrNotPaired, mention: "agentd pair"},
		{name: "not paired, system", paired: false, setup: func(_ *testing.T, e *env) { e.euid = 0 }, opts: Options{System: true, User: "build"}, mention: "sudo -u build agentd pair --hub URL"},
		{name: "config dir readable by others", paired: true, setup: func(t *testing.T, e *env) {
			if err := os.Chmod(filepath.Join(e.home, ".config", "agentd"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, mention: "chmod 700 " + "CONFIG"},
		{name: "key readable by others", paired: true, setup: func(t *testing.T, e *env) {
			if err := os.Chmod(filepath.Join(e.home, ".config", "agentd", config.KeyFile), 0o644); err != nil {
				t.Fatal(err)
			}
		}, mention: "chmod 600 " + "CONFIG/" + config.KeyFile},
		{name: "another agentd serves the state dir", paired: true, setup: func(_ *testing.T, e *env) { e.serving = true }, is: ErrAlreadyServing, mention: "agentd.sock"},
		{name: "not systemd", paired: true, setup: func(_ *testing.T, e *env) { e.svc.platform = "unix-systemv" }, is: ErrUnsupported, mention: "--print"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.paired)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			m := e.manager(t, tc.opts)
			_, err := m.Install(t.Context(), true)
			if err == nil {
				t.Fatal("Install succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			mention := strings.ReplaceAll(tc.mention, "CONFIG", filepath.Join(e.home, ".config", "agentd"))
			if !strings.Contains(err.Error(), mention) {
				t.Errorf("error %q does not mention %q", err, mention)
			}
			if strings.HasPrefix(tc.name, "config") || strings.HasPrefix(tc.name, "key") {
				var pe *config.PermissionError
				if !errors.As(err, &pe) {
					t.Errorf("error %v is not a *config.PermissionError", err)
				}
			}
			for _, c := range e.svc.calls {
				if c == "install" {
					t.Errorf("the service manager was asked to install")
				}
			}
			if _, err := os.Stat(m.Path()); err == nil {
				t.Errorf("%s was written", m.Path())
			}
		})
	}
}

func TestInstallFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.svc.installErr = errors.New("Failed to connect to bus: No medium found")
	m := e.manager(t, Options{})
	_, err := m.Install(t.Context(), true)
	if err == nil || !strings.Contains(err.Error(), "login session") {
		t.Fatalf("Install: %v, want the bus error with a hint", err)
	}
	if _, err := os.Stat(m.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("half-installed: %s is there (%v)", m.Path(), err)
	}
}

func TestSystemControlNeedsRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.euid = 0
	if _, err := e.manager(t, Options{System: true, User: "build"}).Install(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	e.euid = 1000
	m := e.manager(t, Options{System: true})
	for name, do := range map[string]func() error{
		"uninstall": func() error { return m.Uninstall(t.Context()) },
		"start":     func() error { return m.Start(t.Context()) },
		"stop":      func() error { return m.Stop(t.Context()) },
		"restart":   func() error { return m.Restart(t.Context()) },
	} {
		if err := do(); !errors.Is(err, ErrNeedRoot) {
			t.Errorf("%s --system as a user: %v, want ErrNeedRoot", name, err)
		}
	}
}

func TestUserWithoutSystem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	if _, err := New(e.options(Options{User: "build"})); err == nil {
		t.Error("New(User without System) succeeded")
	}
}

func TestDefinitionPerOS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	for _, tc := range []struct {
		goos   string
		system bool
		kind   string
		path   string
	}{
		{"linux", false, KindSystemdUser, filepath.Join(e.home, ".config/systemd/user/agentd.service")},
		{"linux", true, KindSystemdSystem, filepath.Join(e.home, "etc-systemd-system", "agentd.service")},
		{"darwin", false, KindLaunchd, filepath.Join(e.home, "Library/LaunchAgents/ai.devdepot.agentd.plist")},
		{"darwin", true, KindLaunchd, "/Library/LaunchDaemons/ai.devdepot.agentd.plist"},
		{"windows", false, KindWindows, ""},
	} {
		o := e.options(Options{System: tc.system})
		if tc.system {
			o.User = "build"
		}
		o.GOOS = tc.goos
		o.Executable = "/usr/local/bin/agentd"
		if tc.goos == "windows" {
			o.Executable = `C:\agentd\agentd.exe`
		}
		m, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind() != tc.kind || m.Path() != tc.path {
			t.Errorf("%s system=%v: kind %s path %s, want %s %s", tc.goos, tc.system, m.Kind(), m.Path(), tc.kind, tc.path)
		}
		if _, err := m.Definition(); err != nil {
			t.Errorf("%s system=%v: Definition: %v", tc.goos, tc.system, err)
		}
	}
	o := e.options(Options{})
	o.GOOS = "plan9"
	if _, err := New(o); !errors.Is(err, ErrUnsupported) {
		t.Errorf("New on plan9: %v, want ErrUnsupported", err)
	}
}

// TestProbeSocket checks the "already serving" probe against a real listener.
func TestProbeSocket(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "agentd-probe") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agentd.sock")
	if probeSocket(sock) {
		t.Error("probe of a missing socket says serving")
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if !probeSocket(sock) {
		t.Error("probe of a listening socket says not serving")
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	// A child another parallel test forks in that instant holds the
	// listening socket until it execs (close-on-exec): the file goes stale
	// a moment later then, never stays serving.
	stale := false
	for deadline := time.Now().Add(2 * time.Second); !stale && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		stale = !probeSocket(sock)
	}
	if !stale {
		t.Error("probe of a stale socket file says serving")
	}
}

func TestRunServiceFromTerminal(t *testing.T) {
	t.Parallel()
	want := errors.New("ran")
	if err := RunService(t.Context(), func(context.Context) error { return want }); !errors.Is(err, want) {
		t.Errorf("RunService = %v, want the run's error", err)
	}
}

// TestSCMProgram drives the Windows adapter the way kardianos does: Start,
// then Stop, which must cancel run's context and wait for it.
func TestSCMProgram(t *testing.T) {
	t.Parallel()
	p := &scmProgram{parent: t.Context(), done: make(chan struct{}), run: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	if err := p.Start(nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(nil); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(p.err, context.Canceled) {
		t.Errorf("run ended with %v, want context.Canceled", p.err)
	}
}
