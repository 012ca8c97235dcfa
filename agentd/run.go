package agentd

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/config"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/internal/version"
	"github.com/devdepot-ai/agentd/internal/wire"
	"github.com/devdepot-ai/agentd/transport"
)

// RunOptions configures Run. Zero fields get defaults.
type RunOptions struct {
	// Server configures the daemon (workspace, mode, state dir, logger, …).
	Server Options
	// ConfigDir holds the pairing and the key (default: config.ConfigDir()).
	ConfigDir string
	// Socket is the local socket `agentd status` and agentctl use (default:
	// agentd.sock in the state dir). "-" serves no local socket.
	Socket string
	// Backoff paces reconnects (zero: the defaults).
	Backoff transport.Backoff
	// Sandbox, when set, is the credential of a sandbox the hub started:
	// used instead of a pairing in ConfigDir (see SandboxFromEnv).
	Sandbox *SandboxCredential
	// PairingCheck is how often a paired daemon checks that its pairing is
	// still in ConfigDir (default 2 s): once `agentd unpair` removed it, the
	// daemon stops what the hub started and ends.
	PairingCheck time.Duration
}

// SandboxCredential is what a hub gives the agentd of a sandbox it starts:
// the hub's socket, the sandbox's id and a key made for it alone, valid
// while the sandbox exists. No org secret or API token is in it.
type SandboxCredential struct {
	Hub         string // unix:///run/agentd/hub.sock, or wss://HOST:PORT (the hub's sandbox listener)
	ID          string // sb-…
	Org         string
	Key         ed25519.PrivateKey
	Environment string // the hub environment, for SystemService.Info
	Image       string // the pinned image, for SystemService.Info
	Platform    string // gVisor's platform, for SystemService.Info ("" under runc)
	// Egress is the loopback address to serve the sandbox's egress proxy
	// on (its allow list's only way out); "" when it has none.
	Egress string
	// CAFile is the PEM file of the CA the hub's sandbox listener's
	// certificate is from, for a wss:// Hub ("": the system's roots).
	CAFile string
}

// The environment variables a hub sets for a sandbox's agentd (defined
// with the rest of the wire in internal/wire, which the hub imports). Like
// every AGENTD_* variable they never reach the commands the agent runs.
const (
	EnvSandboxHub      = wire.EnvSandboxHub
	EnvSandboxID       = wire.EnvSandboxID
	EnvSandboxOrg      = wire.EnvSandboxOrg
	EnvSandboxKey      = wire.EnvSandboxKey // the Ed25519 seed, base64 (standard, padded)
	EnvSandboxKeyFile  = wire.EnvSandboxKeyFile
	EnvSandboxCAFile   = wire.EnvSandboxCAFile
	EnvSandboxEnv      = wire.EnvSandboxEnv
	EnvSandboxImage    = wire.EnvSandboxImage
	EnvSandboxPlatform = wire.EnvSandboxPlatform
	EnvSandboxEgress   = wire.EnvSandboxEgress
)

// SandboxFromEnv reads a sandbox's credential from the variables a hub
// sets (getenv is os.Getenv in agentd). ok is false when there is none.
// The key comes from the file EnvSandboxKeyFile names, which is removed
// once read (it fails if it cannot be: the workload would find the key
// there), or, from older hubs, from EnvSandboxKey.
func SandboxFromEnv(getenv func(string) string) (c *SandboxCredential, ok bool, err error) {
	seed := getenv(EnvSandboxKey)
	if file := getenv(EnvSandboxKeyFile); file != "" && seed == "" {
		b, err := readKeyFile(file)
		if err != nil {
			return nil, true, err
		}
		seed = b
	}
	if seed == "" {
		return nil, false, nil
	}
	raw, err := base64.StdEncoding.DecodeString(seed)
	if err != nil || len(raw) != ed25519.SeedSize {
		return nil, true, fmt.Errorf("%s: want a base64 Ed25519 seed of %d bytes", EnvSandboxKey, ed25519.SeedSize)
	}
	c = &SandboxCredential{
		Hub: getenv(EnvSandboxHub), ID: getenv(EnvSandboxID), Org: getenv(EnvSandboxOrg),
		Key: ed25519.NewKeyFromSeed(raw), Environment: getenv(EnvSandboxEnv), Image: getenv(EnvSandboxImage),
		Platform: getenv(EnvSandboxPlatform),
		Egress:   getenv(EnvSandboxEgress),
		CAFile:   getenv(EnvSandboxCAFile),
	}
	if c.Hub == "" || c.ID == "" {
		return nil, true, fmt.Errorf("%s and %s must be set with %s", EnvSandboxHub, EnvSandboxID, EnvSandboxKey)
	}
	return c, true, nil
}

// readKeyFile reads the sandbox's key from file and removes the file.
func readKeyFile(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvSandboxKeyFile, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<10))
	f.Close()
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvSandboxKeyFile, err)
	}
	if err := os.Remove(file); err != nil {
		return "", fmt.Errorf("%s: remove the key once read: %w", EnvSandboxKeyFile, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Run is `agentd run`: the daemon serving its paired hub through the tunnel
// it dials, and its local socket, until ctx is cancelled.
func Run(ctx context.Context, o RunOptions) error {
	if o.Server.Mode == ModeSandbox {
		reserveThreads(sandboxThreads)
		if err := makeSandboxHome(os.Getenv("HOME")); err != nil {
			return err
		}
	}
	m, key, dir, err := pairing(o)
	if err != nil {
		return err
	}
	log := o.Server.Logger
	if log == nil {
		log = zap.NewNop()
	}
	tun, err := listenTunnel(m, key, o, log)
	if err != nil {
		return err
	}
	defer tun.Close() // Serve closes it too; this is for the errors before Serve
	o.Server.Tunnel = &tunnelInfo{t: tun, org: m.Org}
	srv, err := New(ctx, o.Server)
	if err != nil {
		return err
	}
	defer srv.Close() // Serve closes it too; this is for the errors before Serve
	// The hub sets the actor of the calls on the tunnel: trust it there only.
	listeners := []net.Listener{hubListener{tun}}
	if o.Socket != "-" {
		sock := o.Socket
		if sock == "" {
			sock = filepath.Join(srv.Options().StateDir, "agentd.sock")
		}
		a, err := listen.Parse(sock)
		if err != nil {
			return err
		}
		local, err := listen.Listen(a)
		if err != nil {
			return fmt.Errorf("local socket: %w", err)
		}
		defer os.Remove(a.Address)
		listeners = append(listeners, local)
	}
	if c := o.Sandbox; c != nil && c.Egress != "" {
		_, stop, err := serveEgress(ctx, c, tun.DialHub, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		logTunnel(watchCtx, tun, log, srv.hubRefused)
	}()
	defer func() {
		stopWatch()
		<-watched
	}()
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	if o.Sandbox == nil {
		every := o.PairingCheck
		if every <= 0 {
			every = 2 * time.Second
		}
		checked := make(chan struct{})
		go func() {
			defer close(checked)
			if watchPairing(runCtx, dir, m.MachineID, every) {
				n := srv.stopHubWork("this machine was unpaired (agentd unpair)")
				log.Warn("this machine was unpaired: its pairing and key are gone from the config dir; stopped the commands the hub started and ending",
					zap.String("machine", m.MachineID), zap.Int("stopped", n))
				stopRun(errUnpaired)
			}
		}()
		defer func() {
			stopRun(nil)
			<-checked
		}()
	}
	log.Info("running", zap.String("hub", m.Hub), zap.String("machine", m.MachineID), zap.String("org", m.Org),
		zap.String("workspace", srv.Options().Workspace), zap.String("version", version.Version))
	err = srv.Serve(runCtx, listeners...)
	if errors.Is(context.Cause(runCtx), errUnpaired) {
		return nil // unpaired on purpose: nothing left to serve
	}
	return err
}

// listenTunnel is Run's tunnel to hub m: the CA m names (none: the
// system's roots), no proxy for a sandbox.
func listenTunnel(m config.Machine, key ed25519.PrivateKey, o RunOptions, log *zap.Logger) (*transport.Tunnel, error) {
	pool, err := caPool(m.CAFile)
	if err != nil {
		return nil, err
	}
	return transport.Listen(transport.Options{
		HubURL: m.Hub, MachineID: m.MachineID, Key: key, RootCAs: pool, Proxy: tunnelProxy(o.Sandbox),
		Logger: log, UserAgent: "agentd/" + version.Version, Backoff: o.Backoff, // the tunnel names itself "tunnel"
	})
}

// tunnelProxy is the tunnel's proxy: none for a sandbox, whose
// HTTPS_PROXY is its own egress proxy (for the commands it runs; the hub
// would refuse its own address there, and the proxy needs the tunnel's
// hub), the environment's otherwise (nil: transport's default).
func tunnelProxy(sb *SandboxCredential) func(*http.Request) (*url.URL, error) {
	if sb == nil {
		return nil
	}
	return func(*http.Request) (*url.URL, error) { return nil, nil }
}

// errUnpaired ends a run whose pairing was removed.
var errUnpaired = errors.New("unpaired")

// watchPairing reports true once the pairing in dir is gone or names
// another machine; false when ctx ends first.
func watchPairing(ctx context.Context, dir, machineID string, every time.Duration) bool {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		m, _, err := config.LoadMachine(dir)
		if errors.Is(err, config.ErrNotPaired) || (err == nil && m.MachineID != machineID) {
			return true
		}
	}
}

// sandboxThreads is how many OS threads a sandbox's agentd makes at start.
const sandboxThreads = 32

// reserveThreads makes the Go runtime start n OS threads now and keep them
// idle for reuse. In a sandbox, agentd shares the pids limit with what it
// runs: once a fork bomb holds every pid, the runtime cannot start a thread
// and dies ("failed to create new OS thread"); threads made before are
// reused instead (the runtime never ends an idle thread).
func reserveThreads(n int) {
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread() // this goroutine alone on its own thread
			started.Done()
			release.Wait()
			runtime.UnlockOSThread() // the thread goes back to the idle pool
		}()
	}
	started.Wait()
	release.Done()
}

// pairing returns the hub, machine and key Run dials with: the sandbox's
// credential, or the pairing stored in the config dir.
func pairing(o RunOptions) (config.Machine, ed25519.PrivateKey, string, error) {
	if c := o.Sandbox; c != nil {
		return config.Machine{Hub: c.Hub, MachineID: c.ID, Org: c.Org, Name: c.ID, CAFile: c.CAFile}, c.Key, "", nil
	}
	dir := o.ConfigDir
	if dir == "" {
		d, err := config.ConfigDir()
		if err != nil {
			return config.Machine{}, nil, "", err
		}
		dir = d
	}
	m, key, err := config.LoadMachine(dir)
	return m, key, dir, err
}

// tunnelInfo feeds SystemService.Info the tunnel's state.
type tunnelInfo struct {
	t   *transport.Tunnel
	org string
}

// logTunnel logs the tunnel's state changes in plain words, and tells
// refused why the hub refused the machine each time it starts to.
func logTunnel(ctx context.Context, t *transport.Tunnel, log *zap.Logger, refused func(error)) {
	var last transport.State
	for {
		st := t.Status()
		if st.State != last {
			last = st.State
			switch st.State {
			case transport.StateConnected:
				log.Info("tunnel up", zap.String("hub", st.Hub))
			case transport.StateRejected:
				log.Error("the hub refused this machine; retrying slowly", zap.Error(st.Err), zap.Time("next_attempt", st.NextAttempt))
				refused(st.Err)
			case transport.StateWaiting:
				if st.Err != nil && !errors.Is(st.Err, context.Canceled) {
					log.Warn("tunnel down; reconnecting", zap.Error(st.Err), zap.Time("next_attempt", st.NextAttempt))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Updated():
		}
	}
}
