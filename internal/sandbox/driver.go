// Package sandbox runs the hub's container sandboxes: a Driver starts and
// stops containers on an engine (Docker today; a Kubernetes Pod driver is the
// scale-out path and fits the same interface), and the types here describe
// what a sandbox is, independent of the engine.
//
// A sandbox is one container that runs agentd in sandbox mode, dialling the
// hub over a unix socket the hub mounts in. Everything about hardening
// (uid 1000, read-only root, dropped capabilities, limits) is decided by the
// Spec the hub builds; a Driver carries it out exactly, and refuses what it
// cannot carry out rather than running a weaker container.
package sandbox

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
)

// Errors a Driver returns, wrapped with context; match them with errors.Is.
var (
	// ErrNotFound: no such container, volume or image.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the engine cannot be reached (down, socket missing).
	ErrUnavailable = errors.New("container engine unavailable")
	// ErrExhausted: the host has no room for another sandbox (no free
	// loop device for its workspace, say).
	ErrExhausted = errors.New("the host's sandbox resources are exhausted")
	// ErrNotSupported: the engine has no such operation (Kubernetes has
	// no freezer, so its driver cannot Pause); the caller does without
	// (the hub stops a sandbox it would have paused).
	ErrNotSupported = errors.New("not supported by this container engine")
)

// Labels every sandbox container and volume carries, so that a restarted
// hub finds its sandboxes again and reaps orphans.
const (
	LabelManaged    = "ai.devdepot.agentd.sandbox"              // "1" on everything the hub made
	LabelHub        = "ai.devdepot.agentd.hub"                  // the hub instance that made it
	LabelID         = "ai.devdepot.agentd.sandbox.id"           // sb-…
	LabelOrg        = "ai.devdepot.agentd.sandbox.org"          // org id
	LabelEnv        = "ai.devdepot.agentd.sandbox.env"          // environment name
	LabelConv       = "ai.devdepot.agentd.sandbox.conversation" // conversation id ("" for a warm-pool sandbox)
	LabelWarm       = "ai.devdepot.agentd.sandbox.warm"         // "1" while in the warm pool
	LabelEgress     = "ai.devdepot.agentd.sandbox.egress"       // the allow list, comma-separated (none: no proxy)
	LabelBroker     = "ai.devdepot.agentd.sandbox.broker"       // brokered credentials' rules, JSON, references only (never values)
	LabelNetwork    = "ai.devdepot.agentd.sandbox.network"      // the Docker network it joined ("none": no network)
	LabelBaseMarker = "ai.devdepot.sandbox-base.contract"       // on the base image: contract version, "1"
	LabelBaseBuild  = "ai.devdepot.sandbox-base.build"          // on the base image: its build id
	BaseContract    = "1"
	BaseImage       = "ghcr.io/devdepot-ai/sandbox-base:1"
	ContainerUser   = "1000:1000"
	WorkspaceDir    = "/workspace"
	AgentdDir       = "/opt/agentd"     // read-only; holds the agentd binary
	HubSocketDir    = "/run/agentd"     // read-only; holds hub.sock
	KeyDir          = "/run/agentd-key" // the sandbox's own; holds its key until agentd has read it
	CADir           = "/run/agentd-ca"  // read-only; the trust bundle of a sandbox with brokered secrets
	HomeDir         = "/home/agent"     // tmpfs; HOME
)

// Spec is everything needed to create one sandbox container.
type Spec struct {
	// Name is the container's name (unique on the engine).
	Name string
	// Image is what to run: repo@sha256:… (pinned), or a local image ID.
	Image string
	// Labels go on the container and its workspace volume.
	Labels map[string]string
	// Env is KEY=VALUE for agentd (its credential among them).
	Env []string
	// Cmd is the entrypoint argv (agentd under the engine's init).
	Cmd []string
	// AgentdHostDir is a host directory holding the static agentd binary,
	// mounted read-only at AgentdDir.
	AgentdHostDir string
	// HubSocketHostDir is a host directory holding the hub's unix socket,
	// mounted read-only at HubSocketDir.
	HubSocketHostDir string
	// KeyHostDir is a host directory of this sandbox alone, mounted
	// read-write at KeyDir: the hub puts the sandbox's key there before
	// each start, agentd reads and removes it.
	KeyHostDir string
	// CAHostDir, when set, is a host directory mounted read-only at CADir:
	// the trust bundle (system roots and the org's CA) of a sandbox whose
	// credentials the hub's egress proxy brokers.
	CAHostDir string
	// Network is "none" or the name of the sandbox bridge network.
	Network string
	// Limits bound what the sandbox may use.
	Limits Limits
	// Runtime is the engine's OCI runtime for the container: "" (the
	// engine's default, runc), RuntimeGVisor or RuntimeGVisorNet. A Driver
	// never runs a spec on another runtime than the one it names.
	Runtime string
	// Home, when set, is HOME instead of the HomeDir tmpfs: a directory
	// under WorkspaceDir (an agent's configuration and caches then live,
	// and go, with its workspace), with the XDG base directories below it.
	// agentd makes it at start.
	Home string
}

// Isolations: what separates a sandbox from the host, a property of its
// environment.
const (
	// IsolationRunc: a container of the host's kernel (the default).
	IsolationRunc = "runc"
	// IsolationGVisor: gVisor's user-space kernel (runsc) between the
	// sandbox and the host's.
	IsolationGVisor = "gvisor"
)

// gVisor's runtimes as make sandbox-runtime registers them with the engine.
const (
	// RuntimeGVisor runs with gVisor's own, empty network stack
	// (--network=none): for sandboxes without a network.
	RuntimeGVisor = "runsc"
	// RuntimeGVisorNet runs with the host kernel's sockets inside the
	// container's own network namespace (--network=host): for sandboxes on
	// a network, whose bridge and egress rules then hold as for runc.
	RuntimeGVisorNet = "runsc-net"
)

// ValidIsolation reports whether s names an isolation.
func ValidIsolation(s string) bool { return s == IsolationRunc || s == IsolationGVisor }

// RuntimeFor is the engine runtime a sandbox of isolation on network
// ("none" or a network's name) runs on; "" is the engine's default (runc).
func RuntimeFor(isolation, network string) string {
	if isolation != IsolationGVisor {
		return ""
	}
	if network == "none" {
		return RuntimeGVisor
	}
	return RuntimeGVisorNet
}

// Platform is the gVisor platform a runtime's arguments choose
// (--platform=ptrace: "ptrace"); "" when they name none.
func Platform(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--platform="); ok {
			return v
		}
		if a == "--platform" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// Limits are a sandbox's resource limits.
type Limits struct {
	CPUs        float64 // e.g. 2.0
	MemoryBytes int64
	Pids        int64
	TmpBytes    int64 // size of the /tmp tmpfs
	HomeBytes   int64 // size of the HOME tmpfs
	// WorkspaceBytes bounds the /workspace volume (writes past it fail
	// with ENOSPC); 0: unbounded, the engine's disk.
	WorkspaceBytes int64
}

// State is a container's state as the engine reports it.
type State string

// States.
const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StatePaused  State = "paused" // its processes frozen (the cgroup freezer)
	StateOther   State = "other"  // restarting, dead, removing
)

// Info describes a sandbox container.
type Info struct {
	ID        string // engine's container id
	Name      string
	Image     string // what Spec.Image said
	ImageID   string // the engine's image id (sha256:…)
	Labels    map[string]string
	State     State
	StartedAt time.Time
	ExitCode  int
	OOMKilled bool
	Error     string // the engine's error for the last start, if any
}

// Image describes a local image.
type Image struct {
	ID           string            // sha256:…
	RepoDigests  []string          // repo@sha256:…
	Labels       map[string]string // the config's labels
	User         string            // the config's USER
	Architecture string
	OS           string
	Size         int64
	Env          []string
	WorkingDir   string
}

// Terms are the words the hub's messages use for what a driver runs, so
// that an error names what the operator sees: a Docker engine's words
// (DockerTerms) unless the driver says its own (Termer).
type Terms struct {
	// Engine is where the containers run: "this hub's Docker engine".
	Engine string
	// Container and Volume name a sandbox's container and its workspace's
	// volume as the engine lists them.
	Container, Volume string
	// Removal is what removes a container behind the hub's back, for a
	// message that asks: "docker container prune".
	Removal string
	// ImageFix says how an image gets onto Engine.
	ImageFix string
	// Owned says what of a sandbox only the hub replica that owns it
	// reaches, for a call that lands on another while that one is down.
	Owned string
}

// DockerTerms are the Docker engine's words.
var DockerTerms = Terms{
	Engine:    "this hub's Docker engine",
	Container: "container",
	Volume:    "volume",
	Removal:   "docker container prune",
	ImageFix:  "build or pull it there",
	Owned:     "its container and /workspace are on that replica's Docker engine",
}

// Termer is a driver with words of its own (the Kubernetes driver's Pods
// and claims).
type Termer interface {
	Terms() Terms
}

// TermsOf returns d's words: its own when it says them, else DockerTerms.
func TermsOf(d Driver) Terms {
	if t, ok := d.(Termer); ok {
		return t.Terms()
	}
	return DockerTerms
}

// Driver starts and stops sandbox containers on an engine. Implementations
// are safe for concurrent use.
type Driver interface {
	// Ping checks that the engine answers; ErrUnavailable when it does not.
	Ping(ctx context.Context) error
	// Runtimes lists the OCI runtimes the engine can run containers on
	// (Spec.Runtime), as it lists them now: name → the arguments it runs
	// the runtime with.
	Runtimes(ctx context.Context) (map[string][]string, error)
	// Pull pulls ref (repo@sha256:… or repo:tag) for linux/amd64 and
	// returns the local image.
	Pull(ctx context.Context, ref string) (Image, error)
	// Image inspects a local image; ErrNotFound when it is not there.
	Image(ctx context.Context, ref string) (Image, error)
	// Create creates the container and its workspace volume (owned by
	// uid 1000 before anything runs), hardened as the package doc says,
	// and returns its id. It does not start it.
	Create(ctx context.Context, s Spec) (string, error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// Stop stops a container: SIGTERM, then SIGKILL after grace.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Pause freezes every process of a running container (the cgroup
	// freezer): they keep their memory and get no CPU until Unpause.
	// Pausing a paused container is not an error; a container that does
	// not run is.
	Pause(ctx context.Context, id string) error
	// Unpause thaws a paused container's processes. Unpausing a running
	// container is not an error; a container that does not run is.
	Unpause(ctx context.Context, id string) error
	// Remove removes a container (stopping it first) and its workspace
	// volume. Removing what is gone already is not an error.
	Remove(ctx context.Context, id string) error
	// Inspect describes one container; ErrNotFound when it is gone.
	Inspect(ctx context.Context, id string) (Info, error)
	// List returns the containers that carry every label in labels.
	List(ctx context.Context, labels map[string]string) ([]Info, error)
	// Volumes returns the volumes that carry every label in labels: a
	// workspace whose container is gone (its removal's answer lost, the
	// engine stopped between the two steps) is found by its labels.
	Volumes(ctx context.Context, labels map[string]string) ([]Volume, error)
	// RemoveVolume removes a volume. Removing what is gone already is not
	// an error; a volume a container still uses is.
	RemoveVolume(ctx context.Context, name string) error
	// CopyWorkspace replaces the workspace of container dst, created and
	// not started, with a copy of container src's: files, directories and
	// symlinks with their modes, owners and modification times. src may
	// be in any state; that its workspace does not change meanwhile (it
	// is paused or stopped) is the caller's to ensure. ErrNotFound when
	// either container is gone.
	CopyWorkspace(ctx context.Context, src, dst string) error
	// Stats samples what a container uses now. A container that does not
	// run gives an empty Stats (zero Read) and no error; ErrNotFound when
	// it is gone.
	Stats(ctx context.Context, id string) (Stats, error)
	// ExportWorkspace reads the workspace of a container that does not
	// run (created or stopped) as a tar stream in the snapshot export
	// format: directories, regular files and symlinks with their modes and
	// modification times, paths relative to the workspace, no owners.
	// The caller closes it; a read error means the stream is incomplete.
	// ErrNotFound when the container is gone.
	ExportWorkspace(ctx context.Context, id string) (io.ReadCloser, error)
	// ImportWorkspace writes such a stream into the workspace of a
	// created container that has not run, every entry owned by the
	// sandbox user (uid and gid 1000) with the stream's mode and
	// modification time. A stream that fails (or ends without the tar's
	// end) fails it and leaves the workspace partial: the caller removes
	// the container.
	ImportWorkspace(ctx context.Context, id string, r io.Reader) error
}

// Volume is a sandbox's workspace volume as the engine lists it.
type Volume struct {
	Name   string
	Labels map[string]string
}

// Stats is one sample of what a container uses. CPU is cumulative, so a
// caller computes a percentage from two samples (CPUPercent).
type Stats struct {
	// Read is when the sample was taken; zero when the container does not
	// run (every other field is then zero too).
	Read time.Time
	// CPUNanos is the CPU time its processes have used since it started.
	CPUNanos uint64
	// MemoryBytes is the memory it uses now (without the page cache the
	// kernel may drop, as docker stats counts it); MemoryLimit its bound
	// (0: none the driver enforces).
	MemoryBytes, MemoryLimit int64
	// Pids is how many processes and threads it has; PidsLimit its bound
	// (0: none the driver enforces). Both count the tasks of its cgroup:
	// under gVisor its sentry's and gofer's threads too, and the limit is
	// the spec's plus the room the driver gives them.
	Pids, PidsLimit int64
	// NetRxBytes and NetTxBytes are what its network interfaces received
	// and sent since it started.
	NetRxBytes, NetTxBytes int64
}

// CPUPercent is the CPU used between two samples of one container, as a
// percentage of one core (200: two cores busy); 0 when either sample is
// empty or they are not in order.
func CPUPercent(prev, cur Stats) float64 {
	dt := cur.Read.Sub(prev.Read)
	if prev.Read.IsZero() || cur.Read.IsZero() || dt <= 0 || cur.CPUNanos < prev.CPUNanos {
		return 0
	}
	return float64(cur.CPUNanos-prev.CPUNanos) / float64(dt.Nanoseconds()) * 100
}
