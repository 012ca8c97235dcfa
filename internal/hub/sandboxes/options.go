package sandboxes

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"net"
	"path/filepath"
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/orgca"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/imagecheck"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// Options configures the container sandboxes a hub runs. A hub without a
// Driver runs none, and says so to calls that need one.
//
// The first fields are the sandboxes' settings (agenthub's flags); the
// last ones are what the manager needs of the hub around it, filled in by
// the hub (agenthub leaves them unset).
type Options struct {
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
	// TunnelListener, when set, serves the sandboxes' socket (their
	// tunnels, the egress proxy's CONNECT) over TLS too, for sandboxes
	// that cannot mount the unix socket (tunnel_tcp.go). Only sandbox ids
	// are admitted there. The manager closes it.
	TunnelListener net.Listener
	// TunnelAdvertise is the host:port sandboxes dial to reach
	// TunnelListener, and the name its certificate carries. Default: the
	// listener's address.
	TunnelAdvertise string
	// TunnelDial makes every sandbox dial wss://TunnelAdvertise (trusting
	// the tunnel's CA alone, handed over beside its key) instead of the
	// unix socket: for a driver whose sandboxes cannot mount host
	// directories (the kubernetes driver with an agentd image). Requires
	// TunnelListener.
	TunnelDial bool
	// TunnelCADir keeps the tunnel's CA (ca.pem, ca-key.pem), made on
	// first use and reused across restarts. Default: sandbox-tunnel-ca
	// beside SocketDir.
	TunnelCADir string
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
	// PauseAfter, StopAfter and DeleteAfter are the hub's lifecycle policy
	// of conversations' sandboxes (an environment's own, in the store,
	// goes over them): how long one idles before it is paused, stopped
	// (its /workspace kept), removed. store.Never turns a step off.
	// Defaults: 5 min, 30 min, never.
	PauseAfter, StopAfter, DeleteAfter time.Duration
	// ArchiveAfter is the hub's archive step: how long a sandbox idles
	// before it is archived (stopped first if it is not). store.Never
	// turns it off. Default DefaultArchiveAfter; off without Archive.
	ArchiveAfter time.Duration
	// Archive keeps archived sandboxes' workspaces. Nil: sandboxes are
	// not archived (the archive step is off, archive is refused).
	Archive ArchiveStore
	// OrgMaxArchive bounds what one org's archives take in Archive, in
	// bytes; 0: no bound. agenthub's default is DefaultOrgMaxArchive.
	OrgMaxArchive int64
	// ArchiveHook, when set (tests), is called at the named points of an
	// archive (HookBeforeUpload, …).
	ArchiveHook func(point string)
	// WarmBuiltin and WarmCustom are the warm-pool sizes per org and
	// environment, filled after the org first uses the environment.
	WarmBuiltin, WarmCustom int
	// StartTimeout bounds a sandbox's start until its agentd is connected.
	// Default 60 s.
	StartTimeout time.Duration
	// HubID names this hub on the containers it makes, so that a restart
	// finds them again and leaves other hubs' alone. Default: derived from
	// the store's secret (the same across restarts of one hub; see
	// DefaultHubID).
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
	// EgressRoots verify the real hosts the egress proxy connects to for
	// brokered credentials. Nil: the system's roots (SSL_CERT_FILE and
	// SSL_CERT_DIR are honoured). Tests trust their own CA with it.
	EgressRoots *x509.CertPool
	// ResolveSecret resolves a secret reference (the hub's secret
	// provider), for the brokered credentials of a sandbox found again
	// after a restart. Nil: they are not restored (those hosts become
	// plain tunnels).
	ResolveSecret func(ctx context.Context, ref string) ([]byte, error)
	// OrgCA returns an org's CA, made on first use, for brokered
	// credentials. Nil: runs with inject rules are refused.
	OrgCA func(ctx context.Context, orgID string) (*orgca.CA, error)
	// Releases tells RunAgent the newest release of an agent, for the
	// notice that a newer one than the image's exists. Nil: no notice (as
	// offline: the image in place is used either way).
	Releases ReleaseResolver
	// Egress re-checks PublicNetwork's egress rules on every reaper tick;
	// while its Err is set, calls to sandboxes on that network are refused
	// (see egressguard.go). Nil: no re-check.
	Egress EgressGuard
	// EgressPrivate installs each public-network sandbox's environment
	// --allow-private addresses and CIDRs as accepts for its source address
	// in PublicNetwork's kernel rules (see envprivate.go). Nil: those lists
	// hold for the egress proxy only.
	EgressPrivate EgressPrivate

	// Store holds the sandboxes' rows, their machine identities and the
	// environments. Required (the hub's).
	Store Store
	// Tunnels are the live tunnels of machines, the sandboxes' among them.
	// Required (the hub's registry).
	Tunnels Tunnels
	// Replicas finds which replica holds a tunnel. Nil: the only hub.
	Replicas Replicas
	// OnTunnel takes a sandbox's tunnel once its handshake on the
	// sandboxes' socket succeeded. Required (the registry's Add).
	OnTunnel func(machineID string, conn net.Conn, remote string)
	// Authenticate tells the socket's tunnel acceptor a machine's key and
	// org (only sandbox ids reach it). Required.
	Authenticate func(ctx context.Context, machineID string) (ed25519.PublicKey, string, error)
	// LimitConns wraps the socket's listener with the hub's connection
	// caps. Nil: none.
	LimitConns func(net.Listener) net.Listener
	// CallerToken is the id of the API token that made the call in ctx,
	// "" for the hub's own work. Nil: always "".
	CallerToken func(ctx context.Context) string
	// Ask asks the replica that drives a sandbox to bring it online (a
	// call here waits for it). Nil: no other replicas to ask.
	Ask func(ctx context.Context, sandboxID string)
	// Revoke tells every replica to close a removed sandbox's tunnel.
	// Nil: nothing to tell.
	Revoke func(ctx context.Context, machineID string)
	// Gone says a sandbox was removed (the activity collectors forget its
	// secrets). Nil: nobody to tell.
	Gone func(id string)
	// Record adds an activity record of the hub's own to an org's stream
	// (the egress proxy's connections). Nil: not recorded.
	Record func(ctx context.Context, orgID string, r *agentdv1.ActivityRecord)
	// RecordAbout adds an activity record of the hub's own about one
	// sandbox (subject) to an org's stream: the processes a lifecycle
	// step ended. Nil: not recorded.
	RecordAbout func(ctx context.Context, orgID, subject string, r *agentdv1.ActivityRecord)
	// CallerName is the name of the API token that made the call in ctx,
	// "" for the hub's own work: a person's step says who ("sandbox
	// stopped by alice"). Nil: always "" ("by request").
	CallerName func(ctx context.Context) string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the manager's logs (named "sandbox"). Default: a
	// no-op logger.
	Logger *zap.Logger
}

// The hub's default lifecycle policy.
const (
	DefaultPauseAfter = 5 * time.Minute
	DefaultStopAfter  = 30 * time.Minute
)

// Store is what the manager asks of the hub's store.
type Store interface {
	Sandbox(ctx context.Context, id string) (store.Sandbox, error)
	ListSandboxes(ctx context.Context, orgID string) ([]store.Sandbox, error)
	ConversationSandbox(ctx context.Context, orgID, env, conv string) (store.Sandbox, error)
	ClaimWarmSandbox(ctx context.Context, orgID, env, hub, conv string, now time.Time) (store.Sandbox, error)
	CreateSandbox(ctx context.Context, sb store.Sandbox) (store.Sandbox, error)
	DeleteSandbox(ctx context.Context, id string) error
	TouchSandbox(ctx context.Context, id string, at time.Time) error
	SetSandboxToken(ctx context.Context, id, token string) error
	SetSandboxContainer(ctx context.Context, id, containerID string) error
	SetSandboxState(ctx context.Context, id, state string, at time.Time, reason string) error
	ArchiveSandbox(ctx context.Context, id, archiveID string, at time.Time, reason string) error
	UnarchiveSandbox(ctx context.Context, id, containerID, image string, at time.Time) error
	ClaimArchivedSandbox(ctx context.Context, id, fromHub, toHub string, pub ed25519.PublicKey) error
	SetSandboxWorkspace(ctx context.Context, id string, bytes int64, at time.Time) error
	SandboxPolicy(ctx context.Context, orgID, env string) (store.Policy, error)
	SetSandboxPolicy(ctx context.Context, orgID, env string, p store.Policy) error
	Machine(ctx context.Context, id string) (store.Machine, error)
	CreateMachine(ctx context.Context, m store.Machine) (store.Machine, error)
	RevokeMachine(ctx context.Context, orgID, id string, at time.Time) error
	Org(ctx context.Context, id string) (store.Org, error)
	Environment(ctx context.Context, orgID, name string) (store.Environment, error)
	BuiltinIsolation(ctx context.Context, orgID string) (string, error)
	ListValidating(ctx context.Context) ([]store.Environment, error)
	SetValidationReason(ctx context.Context, orgID, name string, generation int64, reason string, at time.Time) error
	FinishValidation(ctx context.Context, orgID, name string, generation int64, out store.Environment, at time.Time) (store.Environment, error)
	ListReplicas(ctx context.Context) ([]store.Replica, error)
	EnvironmentAllowPrivate(ctx context.Context, orgID, name string) ([]string, error)
	SetEnvironmentAllowPrivate(ctx context.Context, orgID, name string, list []string, at time.Time) error
	store.SandboxProcesses
	store.Leases
}

// Tunnels is what the manager asks of the hub's tunnel registry.
type Tunnels interface {
	// Get returns the machine's live tunnel.
	Get(machineID string) (transport.MachineConn, bool)
	// Wait waits for the machine's tunnel to be up.
	Wait(ctx context.Context, machineID string) (transport.MachineConn, error)
	// CloseTunnel closes the machine's tunnel, if it has one.
	CloseTunnel(machineID string) bool
}

// Replicas is what the manager asks of the hub's replica registry.
type Replicas interface {
	// Lookup returns the route of a machine's tunnel (store.ErrNotFound:
	// no replica holds it).
	Lookup(ctx context.Context, machineID string) (store.Route, error)
	// ReplicaID is this replica's ID.
	ReplicaID() string
}

// ReleaseResolver returns the newest released version of a builder
// profile's agent (e.g. from its npm registry), on the hub's host.
type ReleaseResolver interface {
	Latest(ctx context.Context, p agentimage.Profile) (string, error)
}

func (o *Options) defaults() {
	if o.KeyDir == "" && o.SocketDir != "" {
		o.KeyDir = filepath.Join(filepath.Dir(filepath.Clean(o.SocketDir)), "sandbox-keys")
	}
	if o.TunnelCADir == "" && o.SocketDir != "" {
		o.TunnelCADir = filepath.Join(filepath.Dir(filepath.Clean(o.SocketDir)), "sandbox-tunnel-ca")
	}
	if o.TunnelAdvertise == "" && o.TunnelListener != nil {
		o.TunnelAdvertise = o.TunnelListener.Addr().String()
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
	if o.ArchiveAfter == 0 {
		o.ArchiveAfter = DefaultArchiveAfter
	}
	if o.Archive == nil {
		o.ArchiveAfter = store.Never
	}
	if o.PauseAfter == 0 {
		o.PauseAfter = DefaultPauseAfter
	}
	if o.StopAfter == 0 {
		o.StopAfter = DefaultStopAfter
	}
	if o.DeleteAfter == 0 {
		o.DeleteAfter = store.Never
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Agents == nil {
		o.Agents = agentimage.Profiles()
	}
	if o.CallerToken == nil {
		o.CallerToken = func(context.Context) string { return "" }
	}
	if o.Ask == nil {
		o.Ask = func(context.Context, string) {}
	}
	if o.Revoke == nil {
		o.Revoke = func(context.Context, string) {}
	}
	if o.Gone == nil {
		o.Gone = func(string) {}
	}
	if o.Record == nil {
		o.Record = func(context.Context, string, *agentdv1.ActivityRecord) {}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// check refuses Options a manager cannot run with.
func (o *Options) check() error {
	switch {
	case o.Driver == nil:
		return errors.New("hub: sandboxes need a Driver")
	case o.AgentdDir == "" || o.SocketDir == "":
		return errors.New("hub: sandboxes need AgentdDir (the static agentd) and SocketDir (the hub's socket)")
	case o.TunnelDial && o.TunnelListener == nil:
		return errors.New("hub: sandboxes that dial the hub over TCP (TunnelDial) need its TunnelListener")
	case o.Store == nil || o.Tunnels == nil || o.OnTunnel == nil || o.Authenticate == nil:
		return errors.New("hub: sandboxes need the hub's Store, Tunnels, OnTunnel and Authenticate")
	}
	return ValidHubID(o.HubID)
}
