package hub

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/imagecheck"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// SandboxOptions configures the container sandboxes a hub runs. A hub
// without a Driver runs none, and says so to calls that need one.
type SandboxOptions struct {
	// Driver runs the containers. Nil: no sandboxes.
	Driver sandbox.Driver
	// AgentdDir is a host directory holding the static agentd binary that
	// every sandbox runs (mounted read-only). Required with Driver.
	AgentdDir string
	// SocketDir is the host directory where the hub serves the unix socket
	// sandboxes dial (mounted read-only into each). Required with Driver.
	SocketDir string
	// KeyDir is a host directory, the hub's alone (0700), where each
	// sandbox's key is kept for its restarts, and from where it is handed
	// to the sandbox's agentd through a mount of its own, which agentd
	// empties. Default: sandbox-keys beside SocketDir.
	KeyDir string
	// BaseImage is the built-in sandbox's image. Default sandbox.BaseImage.
	BaseImage string
	// PublicNetwork is the Docker network of environments with network
	// "public" (internet yes, private networks no: see package egress).
	// Empty: such environments are refused, never run on another network.
	PublicNetwork string
	// BuiltinNetwork is the built-in environment's network, "public" or
	// "none". Default "public".
	BuiltinNetwork string
	// Limits bound each sandbox. Zero fields get defaults (CPUs:
	// DefaultSandboxCPUs of the host's, 2 GiB, 512 pids, /tmp 1 GiB,
	// HOME 1 GiB).
	Limits sandbox.Limits
	// WorkspaceBound says what bounds Limits.WorkspaceBytes, for env
	// show ("ext4 on loop"); the driver must carry the limit out.
	WorkspaceBound string
	// HostCPUs is the host's CPU count the CPU default derives from.
	// Default runtime.NumCPU().
	HostCPUs int
	// OrgMaxSandboxes caps the sandboxes of one org (every replica's, the
	// warm pool not counted until claimed, agent runs counted); 0: no cap.
	// agenthub's default is DefaultOrgMaxSandboxes.
	OrgMaxSandboxes int
	// TokenMaxSandboxes caps the sandboxes one API token's calls made in
	// its org; 0: no cap. agenthub's default is DefaultTokenMaxSandboxes.
	TokenMaxSandboxes int
	// IdleTTL is how long a sandbox lives without calls. Default 30 min.
	IdleTTL time.Duration
	// WarmBuiltin and WarmCustom are the warm-pool sizes per org and
	// environment, filled after the org first uses the environment.
	WarmBuiltin, WarmCustom int
	// StartTimeout bounds a sandbox's start until its agentd is connected.
	// Default 60 s.
	StartTimeout time.Duration
	// HubID names this hub on the containers it makes, so that a restart
	// finds them again and leaves other hubs' alone. Default: derived from
	// the store's secret (the same across restarts of one hub).
	HubID string
	// ImageCheck configures the registry checks of custom images (allowed
	// registries, size limit).
	ImageCheck imagecheck.Options
	// Agents are the coding-agent profiles RunAgent knows. Default
	// agentimage.Profiles().
	Agents []agentimage.Profile
	// EgressDial connects the egress proxy of sandboxes with an allow list
	// to a destination the list allows. Default: egressproxy.PublicDialer
	// (it resolves the name and dials public addresses only). Tests map
	// names to servers on loopback with it.
	EgressDial func(ctx context.Context, host string, port int) (net.Conn, error)
	// Releases tells RunAgent the newest release of an agent, for the
	// notice that a newer one than the image's exists. Nil: no notice (as
	// offline: the image in place is used either way).
	Releases ReleaseResolver
	// Egress re-checks PublicNetwork's egress rules on every reaper tick;
	// while its Err is set, calls to sandboxes on that network are refused
	// (see sandbox_egress.go). Nil: no re-check.
	Egress EgressGuard
}

func (o *SandboxOptions) defaults() {
	if o.KeyDir == "" && o.SocketDir != "" {
		o.KeyDir = filepath.Join(filepath.Dir(filepath.Clean(o.SocketDir)), "sandbox-keys")
	}
	if o.BaseImage == "" {
		o.BaseImage = sandbox.BaseImage
	}
	if o.BuiltinNetwork == "" {
		o.BuiltinNetwork = "public"
	}
	if o.HostCPUs <= 0 {
		o.HostCPUs = runtime.NumCPU()
	}
	l := &o.Limits
	if l.CPUs <= 0 {
		l.CPUs = DefaultSandboxCPUs(o.HostCPUs)
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = 2 << 30
	}
	if l.Pids <= 0 {
		l.Pids = 512
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = 1 << 30
	}
	if l.HomeBytes <= 0 {
		l.HomeBytes = 1 << 30
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = 30 * time.Minute
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Agents == nil {
		o.Agents = agentimage.Profiles()
	}
}

// BuiltinEnvironment is the name of the environment every org has.
const BuiltinEnvironment = "builtin"

// envSpec is what a sandbox of an environment runs.
type envSpec struct {
	name    string
	image   string // pinned digest or the base image
	network string // "public" or "none"
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
	// admins and the token that started it may call it: sandboxAccess).
	secrets bool
}

// sandboxes runs an org's sandboxes: get-or-create per (org, environment,
// conversation), the warm pool, the idle reaper, and finding them again
// after a restart.
type sandboxes struct {
	s   *Server
	o   SandboxOptions
	log *zap.Logger

	mu       sync.Mutex
	starting map[string]*startOp  // org/env/conversation → creation in flight
	active   map[string]int       // sandbox id → calls in flight
	used     map[string]time.Time // sandbox id → last call (stored at most once a minute)
	stored   map[string]time.Time // sandbox id → last stored use
	filling  map[string]int       // org/env → warm sandboxes being made
	// quota is held while a sandbox is counted against the caps and
	// recorded (admit), so that concurrent calls cannot both pass.
	quota   sync.Mutex
	baseInv map[string]*inventory // base image → its inventory
	jobs    map[string]context.CancelFunc
	egress  map[string]egressGrant // sandbox id → its allow list, once asked
	// found is set while reconcile has succeeded since the last container
	// that could not be removed: until then, the reaper's ticks reconcile
	// again (the engine may be down for a while).
	found bool
	// baseID is the built-in image's id as last asked (at baseAt).
	baseID string
	baseAt time.Time
	wg     sync.WaitGroup
}

type startOp struct {
	done chan struct{}
	id   string
	err  error
}

func newSandboxes(s *Server, o SandboxOptions) *sandboxes {
	o.defaults()
	return &sandboxes{
		s: s, o: o, log: s.log.Named("sandbox"),
		starting: map[string]*startOp{}, active: map[string]int{}, used: map[string]time.Time{},
		stored: map[string]time.Time{}, filling: map[string]int{}, baseInv: map[string]*inventory{},
		jobs: map[string]context.CancelFunc{}, egress: map[string]egressGrant{},
	}
}

// goFn runs fn in a goroutine the hub waits for at Close.
func (m *sandboxes) goFn(fn func(ctx context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn(m.s.ctx)
	}()
}

// engineStatus turns an engine error into the caller's status.
func engineStatus(err error, what string) error {
	if errors.Is(err, sandbox.ErrUnavailable) {
		return status.Errorf(codes.Unavailable, "%s: %v", what, err)
	}
	if errors.Is(err, sandbox.ErrExhausted) {
		return status.Errorf(codes.ResourceExhausted, "%s: %v", what, err)
	}
	return status.Errorf(codes.FailedPrecondition, "%s: %v", what, err)
}

// resolve finds what an environment runs, or why it cannot run now
// (FAILED_PRECONDITION naming it: never another environment instead).
func (m *sandboxes) resolve(ctx context.Context, org store.Org, name string) (envSpec, error) {
	if name == BuiltinEnvironment {
		// The base image's id, asked of the engine at most every 30 s:
		// not a Docker round trip on every call, and a connected sandbox
		// keeps working while the engine is away.
		m.mu.Lock()
		id, at := m.baseID, m.baseAt
		m.mu.Unlock()
		if id != "" && time.Since(at) < 30*time.Second {
			return envSpec{name: name, image: id, network: m.o.BuiltinNetwork}, nil
		}
		img, err := m.o.Driver.Image(ctx, m.o.BaseImage)
		if err != nil && id != "" && !errors.Is(err, sandbox.ErrNotFound) {
			return envSpec{name: name, image: id, network: m.o.BuiltinNetwork}, nil
		}
		if err == nil {
			m.mu.Lock()
			m.baseID, m.baseAt = img.ID, time.Now()
			m.mu.Unlock()
		}
		switch {
		case errors.Is(err, sandbox.ErrNotFound):
			return envSpec{}, status.Errorf(codes.FailedPrecondition,
				"environment builtin is unavailable: the sandbox base image %s is not on this hub's Docker engine; build it there with 'make sandbox-base'", m.o.BaseImage)
		case err != nil:
			return envSpec{}, engineStatus(err, "environment builtin")
		}
		return envSpec{name: name, image: img.ID, network: m.o.BuiltinNetwork}, nil
	}
	e, err := m.s.store.Environment(ctx, org.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return envSpec{}, status.Errorf(codes.NotFound, "environment %s not found in org %s; list them with 'agentctl env ls'", name, org.Name)
	}
	if err != nil {
		return envSpec{}, status.Errorf(codes.Unavailable, "environment %s: %v", name, err)
	}
	if e.State != store.EnvReady || e.Pinned == "" {
		why := e.Reason
		if why == "" {
			why = "no validated image yet"
		}
		return envSpec{}, status.Errorf(codes.FailedPrecondition, "environment %s is %s: %s", name, e.State, why)
	}
	return envSpec{name: name, image: e.Pinned, network: e.Network, workspaceMax: e.WorkspaceMax}, nil
}

// network returns the Docker network for an environment's network choice.
func (m *sandboxes) network(env envSpec) (string, error) {
	if env.network == "none" {
		return "none", nil
	}
	if m.o.PublicNetwork == "" {
		return "", status.Errorf(codes.FailedPrecondition,
			"environment %s needs the public network, which this hub has not set up (its egress rules could not be installed; see the hub's log), and it never runs elsewhere", env.name)
	}
	if err := m.egressRefusal(); err != nil {
		return "", err
	}
	return m.o.PublicNetwork, nil
}

// get returns the conversation's sandbox in the environment, creating it
// (from the warm pool when it can) if there is none, once it is online.
// The call that asked records its use (route: enter).
func (m *sandboxes) get(ctx context.Context, org store.Org, envName, conv string) (string, error) {
	env, err := m.resolve(ctx, org, envName)
	if err != nil {
		m.refuse(org, envName, err)
		return "", err
	}
	key := org.ID + "/" + envName + "/" + conv
	for round := 0; ; round++ {
		if round == 10 {
			return "", status.Errorf(codes.Unavailable, "environment %s: the conversation's sandbox keeps changing (other hub replicas make and remove it); retry", envName)
		}
		// Most calls: the conversation's sandbox is there and online (on
		// this replica, or on another one, which the call is forwarded to).
		if sb, err := m.s.store.ConversationSandbox(ctx, org.ID, envName, conv); err == nil && m.current(sb, env) {
			if _, ok := m.s.fleet.Get(sb.ID); ok {
				return sb.ID, nil
			}
			if sb.Hub != m.o.HubID {
				id, err := m.remote(ctx, sb)
				if errors.Is(err, errLookAgain) {
					continue
				}
				if err != nil {
					m.refuse(org, envName, err)
				}
				return id, err
			}
		}
		// Otherwise one caller per conversation brings it up; the others
		// wait for it and look again.
		m.mu.Lock()
		op, busy := m.starting[key]
		if !busy {
			op = &startOp{done: make(chan struct{})}
			m.starting[key] = op
		}
		m.mu.Unlock()
		if busy {
			select {
			case <-op.done:
			case <-ctx.Done():
				return "", status.FromContextError(ctx.Err()).Err()
			}
			if op.err != nil && !errors.Is(op.err, errLookAgain) {
				return "", op.err
			}
			continue
		}
		op.id, op.err = m.bringUp(ctx, org, env, conv)
		m.mu.Lock()
		delete(m.starting, key)
		m.mu.Unlock()
		close(op.done)
		if errors.Is(op.err, errLookAgain) {
			continue
		}
		if op.err != nil {
			m.refuse(org, envName, op.err)
		}
		return op.id, op.err
	}
}

// bringUp gives the conversation a sandbox that is online: its own once it
// reconnects or is started again, else a new one (a warm one if it can).
// errLookAgain: another replica's sandbox is the conversation's now.
func (m *sandboxes) bringUp(ctx context.Context, org store.Org, env envSpec, conv string) (string, error) {
	if sb, err := m.s.store.ConversationSandbox(ctx, org.ID, env.name, conv); err == nil {
		switch {
		case !m.current(sb, env):
			// The environment was updated: the conversation moves to the
			// new pin in a fresh sandbox.
			m.destroy(context.WithoutCancel(ctx), sb, "the environment's image changed")
		case sb.Hub != m.o.HubID:
			return "", errLookAgain
		case m.awaitOnline(ctx, sb) == nil:
			return sb.ID, nil
		default:
			err := m.restart(ctx, sb)
			if err == nil {
				return sb.ID, nil
			}
			m.log.Warn("sandbox lost; starting a new one", zap.String("sandbox", sb.ID), zap.Error(err))
			m.destroy(context.WithoutCancel(ctx), sb, "lost: "+err.Error())
		}
	}
	return m.start(ctx, org, env, conv)
}

// restart starts a conversation's sandbox again whose container stopped
// (killed, out of memory, the host restarted): same container, same
// /workspace volume, a fresh /tmp and HOME; agentd dials in again with the
// same credential. A second stop within one call is not retried.
func (m *sandboxes) restart(ctx context.Context, sb store.Sandbox) error {
	if sb.ContainerID == "" {
		return errors.New("no container")
	}
	info, err := m.o.Driver.Inspect(ctx, sb.ContainerID)
	if err != nil {
		return err
	}
	if info.State == sandbox.StateRunning {
		return errors.New("its container runs but agentd does not connect")
	}
	m.log.Info("sandbox stopped; starting it again", zap.String("sandbox", sb.ID), zap.String("why", exitReason(info)))
	if err := m.offerKey(sb.ID); err != nil {
		return err
	}
	if err := m.o.Driver.Start(ctx, sb.ContainerID); err != nil {
		return err
	}
	return m.awaitOnline(ctx, sb)
}

// refuse logs a call that an environment could not take, at error level.
func (m *sandboxes) refuse(org store.Org, env string, err error) {
	if status.Code(err) == codes.NotFound {
		return
	}
	m.log.Error("environment refused a call", zap.String("org", org.Name), zap.String("environment", env), zap.Error(err))
}

// start gives the conversation a warm sandbox, or makes one.
func (m *sandboxes) start(ctx context.Context, org store.Org, env envSpec, conv string) (string, error) {
	defer m.fill(org, env)
	token := callerToken(ctx)
	m.quota.Lock()
	if err := m.admit(ctx, org, token); err != nil {
		m.quota.Unlock()
		return "", err
	}
	sb, err := m.s.store.ClaimWarmSandbox(ctx, org.ID, env.name, m.o.HubID, conv, m.s.opts.Now())
	if err == nil && token != "" {
		err = m.s.store.SetSandboxToken(ctx, sb.ID, token)
	}
	m.quota.Unlock()
	if err == nil {
		if sb.Image == env.image && m.awaitOnline(ctx, sb) == nil {
			return sb.ID, nil
		}
		m.destroy(context.WithoutCancel(ctx), sb, "a stale warm sandbox")
	}
	sb, err = m.create(ctx, org, env, conv, false)
	if errors.Is(err, store.ErrConflict) {
		// Another replica made it meanwhile: get waits for it there.
		return "", errLookAgain
	}
	if err != nil {
		return "", err
	}
	return sb.ID, nil
}

// create makes a sandbox: its machine identity (a key for it alone), its
// row, its container; and waits until its agentd is connected.
func (m *sandboxes) create(ctx context.Context, org store.Org, env envSpec, conv string, warm bool) (store.Sandbox, error) {
	network, err := m.network(env)
	if err != nil {
		return store.Sandbox{}, err
	}
	id := store.NewID("sb-")
	defer m.hold(id)() // the reaper leaves a sandbox being made alone, however long it takes
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return store.Sandbox{}, status.Errorf(codes.Internal, "sandbox key: %v", err)
	}
	now := m.s.opts.Now()
	sbRow := store.Sandbox{ID: id, OrgID: org.ID, Environment: env.name, Conversation: conv, Warm: warm,
		Image: env.image, Hub: m.o.HubID, CreatedAt: now, ExpiresAt: expiry(now, env.ttl),
		HoldsSecrets: env.secrets}
	if !warm {
		sbRow.Token = callerToken(ctx)
	}
	sb, err := m.record(ctx, org, sbRow, pub)
	if err != nil {
		return store.Sandbox{}, err
	}
	spec := sandbox.Spec{
		Name:  "agentd-" + id,
		Image: env.image,
		Labels: map[string]string{
			sandbox.LabelManaged: "1", sandbox.LabelHub: m.o.HubID, sandbox.LabelID: id,
			sandbox.LabelOrg: org.ID, sandbox.LabelEnv: env.name, sandbox.LabelNetwork: network,
		},
		Env: []string{
			wire.EnvSandboxHub + "=unix://" + sandbox.HubSocketDir + "/" + SandboxSocketName,
			wire.EnvSandboxID + "=" + id,
			wire.EnvSandboxOrg + "=" + org.Name,
			wire.EnvSandboxKeyFile + "=" + sandbox.KeyDir + "/" + sandboxKeyFile,
			wire.EnvSandboxEnv + "=" + env.name,
			wire.EnvSandboxImage + "=" + env.image,
		},
		Cmd:              []string{sandbox.AgentdDir + "/agentd", "run", "--mode", "sandbox"},
		AgentdHostDir:    m.o.AgentdDir,
		HubSocketHostDir: m.o.SocketDir,
		KeyHostDir:       m.keyMount(id),
		Network:          network,
		Limits:           m.o.Limits,
	}
	if env.limits != nil {
		spec.Limits = *env.limits
	}
	if env.workspaceMax > 0 {
		spec.Limits.WorkspaceBytes = env.workspaceMax
	}
	spec.Home = env.home
	m.grantEgress(&spec, egressGrant{org: org.ID, conv: conv, allow: env.allow}, id)
	fail := func(err error) (store.Sandbox, error) {
		m.destroy(context.WithoutCancel(ctx), sb, "failed to start")
		return store.Sandbox{}, err
	}
	if err := m.saveKey(id, key.Seed()); err != nil {
		return fail(status.Errorf(codes.Unavailable, "sandbox key: %v", err))
	}
	cid, err := m.createContainer(ctx, spec)
	if err != nil {
		return fail(engineStatus(err, fmt.Sprintf("environment %s failed to start a sandbox", env.name)))
	}
	sb.ContainerID = cid
	if err := m.s.store.SetSandboxContainer(ctx, id, cid); err != nil {
		return fail(status.Errorf(codes.Unavailable, "record sandbox container: %v", err))
	}
	if err := m.o.Driver.Start(ctx, cid); err != nil {
		return fail(engineStatus(err, fmt.Sprintf("environment %s failed to start a sandbox", env.name)))
	}
	if err := m.awaitOnline(ctx, sb); err != nil {
		return fail(err)
	}
	m.touch(id) // idle from now on, however long the start took
	m.log.Info("sandbox started", zap.String("sandbox", id), zap.String("org", org.Name), zap.String("environment", env.name),
		zap.String("conversation", conv), zap.Bool("warm", warm), zap.Duration("took", m.s.opts.Now().Sub(now)))
	return sb, nil
}

// expiry is the end of a sandbox made at now that lives ttl (zero: none).
func expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

// awaitOnline waits for the sandbox's agentd to connect, watching its
// container: one that exits first is reported with why.
func (m *sandboxes) awaitOnline(ctx context.Context, sb store.Sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, m.o.StartTimeout)
	defer cancel()
	up := make(chan error, 1)
	go func() {
		_, err := m.s.fleet.Wait(ctx, sb.ID)
		up <- err
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-up:
			if err == nil {
				return nil
			}
			return status.Errorf(codes.FailedPrecondition, "environment %s: sandbox %s did not connect within %s: agentd in the image never reached the hub",
				sb.Environment, sb.ID, m.o.StartTimeout)
		case <-tick.C:
		}
		if sb.ContainerID == "" {
			continue
		}
		info, err := m.o.Driver.Inspect(ctx, sb.ContainerID)
		switch {
		case errors.Is(err, sandbox.ErrNotFound):
			return status.Errorf(codes.FailedPrecondition, "environment %s: sandbox %s's container is gone", sb.Environment, sb.ID)
		case err != nil && ctx.Err() == nil:
			return engineStatus(err, "environment "+sb.Environment)
		case err == nil && info.State != sandbox.StateRunning && info.State != sandbox.StateCreated:
			return status.Errorf(codes.FailedPrecondition, "environment %s: sandbox %s stopped before agentd connected: %s",
				sb.Environment, sb.ID, exitReason(info))
		}
	}
}

// exitReason says why a container stopped, in words.
func exitReason(info sandbox.Info) string {
	var parts []string
	switch {
	case info.OOMKilled:
		parts = append(parts, "was killed for using more memory than its limit")
	case info.ExitCode == 126 || info.ExitCode == 127:
		parts = append(parts, fmt.Sprintf("exited with code %d: agentd could not be run in the image", info.ExitCode))
	case info.ExitCode == 137:
		parts = append(parts, "was killed (SIGKILL, exit code 137)")
	default:
		parts = append(parts, fmt.Sprintf("exited with code %d", info.ExitCode))
	}
	if info.Error != "" {
		parts = append(parts, info.Error)
	}
	return strings.Join(parts, "; ")
}

// destroy removes a sandbox: its tunnel, container and workspace, machine
// identity and row.
func (m *sandboxes) destroy(ctx context.Context, sb store.Sandbox, why string) {
	if sb.Hub != m.o.HubID {
		m.destroyRemote(ctx, sb, why)
		return
	}
	now := m.s.opts.Now()
	if err := m.s.store.RevokeMachine(ctx, sb.OrgID, sb.ID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("revoking a sandbox's identity", zap.String("sandbox", sb.ID), zap.Error(err))
	}
	m.s.fleet.CloseTunnel(sb.ID)
	// By name, not by sb.ContainerID: when the container is gone already
	// (a removal whose answer was lost), the name still finds its
	// workspace volume.
	if err := m.o.Driver.Remove(ctx, "agentd-"+sb.ID); err != nil {
		m.log.Warn("removing a sandbox's container", zap.String("sandbox", sb.ID), zap.Error(err))
		m.setFound(false) // the next reconcile removes it, the row gone
	}
	if err := m.s.store.DeleteSandbox(ctx, sb.ID); err != nil {
		m.log.Warn("deleting a sandbox", zap.String("sandbox", sb.ID), zap.Error(err))
	}
	m.removeKey(sb.ID)
	m.mu.Lock()
	delete(m.used, sb.ID)
	delete(m.stored, sb.ID)
	delete(m.egress, sb.ID)
	m.mu.Unlock()
	m.s.activity.sandboxGone(sb.ID)
	m.log.Info("sandbox removed", zap.String("sandbox", sb.ID), zap.String("environment", sb.Environment), zap.String("why", why))
}

// touch records a call's use of a sandbox (in the store at most once a
// minute).
func (m *sandboxes) touch(id string) {
	now := m.s.opts.Now()
	m.mu.Lock()
	m.used[id] = now
	last := m.stored[id]
	store := now.Sub(last) >= time.Minute
	if store {
		m.stored[id] = now
	}
	m.mu.Unlock()
	if store {
		_ = m.s.store.TouchSandbox(context.WithoutCancel(m.s.ctx), id, now)
	}
}

// hold counts the sandbox busy (the reaper leaves it alone) until the
// returned function is called.
func (m *sandboxes) hold(id string) func() {
	m.mu.Lock()
	m.active[id]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if m.active[id]--; m.active[id] <= 0 {
			delete(m.active, id)
		}
		m.mu.Unlock()
	}
}

// enter counts a call in flight to a sandbox (the reaper leaves a busy
// sandbox alone) and returns what the call's end runs: it uncounts the
// call and, when the tunnel broke under it because the container stopped,
// says why (killed, out of memory) instead of gRPC's bare "EOF".
func (m *sandboxes) enter(ctx context.Context, id string) func(error) error {
	m.mu.Lock()
	m.active[id]++
	m.mu.Unlock()
	m.touch(id)
	return func(err error) error {
		m.mu.Lock()
		if m.active[id]--; m.active[id] <= 0 {
			delete(m.active, id)
		}
		m.mu.Unlock()
		m.touch(id)
		if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
			if why := m.stoppedUnder(context.WithoutCancel(ctx), id); why != "" {
				return status.Errorf(codes.Unavailable, "sandbox %s stopped under the call: %s; the conversation's next call starts it again (/workspace is kept, /tmp and HOME are not)", id, why)
			}
		}
		return err
	}
}

// stoppedUnder says why a sandbox's container stopped, or "" while it runs
// (it may take a moment to be seen stopped once its tunnel broke).
func (m *sandboxes) stoppedUnder(ctx context.Context, id string) string {
	sb, err := m.s.store.Sandbox(ctx, id)
	if err != nil || sb.ContainerID == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		info, err := m.o.Driver.Inspect(ctx, sb.ContainerID)
		switch {
		case errors.Is(err, sandbox.ErrNotFound):
			return "its container was removed"
		case err != nil:
			return ""
		case info.State != sandbox.StateRunning:
			return "its container " + exitReason(info)
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fill tops up the warm pool of (org, environment) in the background.
func (m *sandboxes) fill(org store.Org, env envSpec) {
	want := m.o.WarmCustom
	if env.name == BuiltinEnvironment {
		want = m.o.WarmBuiltin
	}
	if want <= 0 {
		return
	}
	key := org.ID + "/" + env.name
	sbs, err := m.s.store.ListSandboxes(context.WithoutCancel(m.s.ctx), org.ID)
	if err != nil {
		return
	}
	have := 0
	for _, sb := range sbs {
		if sb.Warm && sb.Environment == env.name && sb.Hub == m.o.HubID {
			have++
		}
	}
	m.mu.Lock()
	n := want - have - m.filling[key]
	if n > 0 {
		m.filling[key] += n
	}
	m.mu.Unlock()
	for range n {
		m.goFn(func(ctx context.Context) {
			defer func() {
				m.mu.Lock()
				m.filling[key]--
				m.mu.Unlock()
			}()
			if _, err := m.create(ctx, org, env, "", true); err != nil && ctx.Err() == nil {
				m.log.Warn("filling the warm pool", zap.String("environment", env.name), zap.Error(err))
			}
		})
	}
}

// reap removes conversations' sandboxes idle for longer than IdleTTL. Warm
// ones stay (a stale one is removed when claimed, or with its environment).
func (m *sandboxes) reap(ctx context.Context) {
	sbs, err := m.s.store.ListSandboxes(ctx, "")
	if err != nil {
		return
	}
	now := m.s.opts.Now()
	for _, sb := range sbs {
		if sb.Hub != m.o.HubID || sb.Warm || strings.HasPrefix(sb.Conversation, validationConversation) {
			continue
		}
		m.mu.Lock()
		busy := m.active[sb.ID] > 0
		last := sb.LastUsedAt
		if t := m.used[sb.ID]; t.After(last) {
			last = t
		}
		m.mu.Unlock()
		if !sb.ExpiresAt.IsZero() {
			// An agent run: removed at its end, busy or not, never for idling.
			if !now.Before(sb.ExpiresAt) {
				m.destroy(ctx, sb, fmt.Sprintf("its TTL of %s ended", sb.ExpiresAt.Sub(sb.CreatedAt).Round(time.Second)))
			}
			continue
		}
		if !busy && now.Sub(last) > m.o.IdleTTL {
			m.destroy(ctx, sb, fmt.Sprintf("idle for %s", now.Sub(last).Round(time.Second)))
		}
	}
}

// reconcile runs at start: sandboxes whose containers are still there are
// kept (and started again if they stopped); containers nothing knows and
// rows without a container are removed.
func (m *sandboxes) reconcile(ctx context.Context) error { return m.findAgain(ctx, false) }

// findAgain is reconcile. Late (the hub serves calls already: the engine
// was unreachable at the start, or a removal failed since) it removes only
// containers no row knows, and starts again the stopped containers of
// rows; it leaves alone rows without their container listed, which may be
// being made meanwhile, and validations.
func (m *sandboxes) findAgain(ctx context.Context, late bool) (err error) {
	m.setFound(true) // a removal failing from now on clears it
	defer func() {
		if err != nil {
			m.setFound(false)
		}
	}()
	mine := map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: m.o.HubID}
	// Volumes first, rows after: a sandbox being made has its row before
	// its volume, so every volume listed here has its row listed below.
	vols, err := m.o.Driver.Volumes(ctx, mine)
	if err != nil {
		return err
	}
	infos, err := m.o.Driver.List(ctx, mine)
	if err != nil {
		return err
	}
	byID := map[string]sandbox.Info{}
	for _, in := range infos {
		byID[in.Labels[sandbox.LabelID]] = in
	}
	sbs, err := m.s.store.ListSandboxes(ctx, "")
	if err != nil {
		return err
	}
	known, rows := map[string]bool{}, map[string]bool{}
	for _, sb := range sbs {
		if sb.Hub != m.o.HubID {
			continue
		}
		rows[sb.ID] = true
		in, ok := byID[sb.ID]
		switch {
		case late && (!ok || in.ID != sb.ContainerID || strings.HasPrefix(sb.Conversation, validationConversation)):
			// Maybe being made or validated now (its container listed
			// before it was made): kept. A lost one is removed by the
			// next call that finds it.
		case !ok || strings.HasPrefix(sb.Conversation, validationConversation):
			m.destroy(ctx, sb, "not found again after a restart")
			continue
		case in.State != sandbox.StateRunning:
			if err := m.offerKey(sb.ID); err != nil {
				m.destroy(ctx, sb, "could not be started again: "+err.Error())
				continue
			}
			if err := m.o.Driver.Start(ctx, in.ID); err != nil {
				m.destroy(ctx, sb, "could not be started again: "+err.Error())
				continue
			}
		}
		known[sb.ID] = true
	}
	for id, in := range byID {
		if !known[id] {
			if err := m.o.Driver.Remove(ctx, in.ID); err != nil {
				m.log.Warn("removing an orphaned sandbox", zap.String("container", in.ID), zap.Error(err))
				m.setFound(false)
			} else {
				m.log.Info("orphaned sandbox removed", zap.String("sandbox", id), zap.String("container", in.ID))
			}
		}
	}
	m.pruneVolumes(ctx, vols, byID, rows)
	m.log.Info("sandboxes found again", zap.Int("kept", len(known)), zap.Int("containers", len(infos)))
	return nil
}

// pruneVolumes removes the workspaces that lost their container and their
// row: what a removal leaves when the engine answered its first step but
// the answer was lost, or the engine went away between the two steps.
func (m *sandboxes) pruneVolumes(ctx context.Context, vols []sandbox.Volume, containers map[string]sandbox.Info, rows map[string]bool) {
	for _, v := range vols {
		id := v.Labels[sandbox.LabelID]
		if _, ok := containers[id]; ok || rows[id] {
			continue
		}
		if err := m.o.Driver.RemoveVolume(ctx, v.Name); err != nil {
			m.log.Warn("removing an orphaned workspace", zap.String("volume", v.Name), zap.Error(err))
			m.setFound(false)
			continue
		}
		m.log.Info("orphaned workspace removed", zap.String("sandbox", id), zap.String("volume", v.Name))
	}
}

func (m *sandboxes) setFound(v bool) {
	m.mu.Lock()
	m.found = v
	m.mu.Unlock()
}

// run is the background work: the idle reaper, and reconcile again until
// it succeeds.
func (m *sandboxes) run(ctx context.Context) {
	every := min(m.o.IdleTTL/4, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.mu.Lock()
			found := m.found
			m.mu.Unlock()
			if !found {
				_ = m.findAgain(ctx, true) // logged at the start; calls say why meanwhile
			} else {
				m.sweep(ctx)
			}
			m.checkEgress(ctx)
			m.reap(ctx)
		}
	}
}

// remove removes one of the org's sandboxes.
func (m *sandboxes) remove(ctx context.Context, org store.Org, id string) error {
	sb, err := m.s.store.Sandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sb.OrgID != org.ID) {
		return status.Errorf(codes.NotFound, "sandbox %s not found in org %s; list them with 'agentctl sandbox ls'", id, org.Name)
	}
	if err != nil {
		return status.Errorf(codes.Unavailable, "sandbox %s: %v", id, err)
	}
	m.destroy(ctx, sb, "removed by request")
	return nil
}

// wait waits for the background work to end (the hub's context is done).
func (m *sandboxes) wait() { m.wg.Wait() }

// SandboxSocketName is the unix socket the hub serves sandboxes on, in
// SandboxOptions.SocketDir.
const SandboxSocketName = "hub.sock"
