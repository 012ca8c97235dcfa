package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Options configure a Driver. The zero value talks to the local engine.
type Options struct {
	// Host is the engine's address, as in DOCKER_HOST:
	// unix:///var/run/docker.sock or tcp://host:port. Default (""): the
	// environment (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH,
	// DOCKER_API_VERSION), else the local socket.
	Host string
	// Logger receives what the driver does. Default: a no-op logger.
	Logger *zap.Logger
	// WorkspaceDir is a host directory for bounded workspaces (Linux; the
	// engine on this host): each is an ext4 image there on a loop device
	// (see workspace_linux.go). Empty: a Spec with WorkspaceBytes is
	// refused.
	WorkspaceDir string
	// Fetch writes the image ref (repo@sha256:…) as a docker load tarball
	// tagged tag, read by the hub from its registry, for a registry the
	// engine cannot pull from (agenthub serve --insecure-registry,
	// --registry-ca: the engine keeps its own settings); false: not such a
	// registry. Nil: the engine pulls every image itself (load.go).
	Fetch func(ctx context.Context, ref, tag string, w io.Writer) (bool, error)
	// CopyInHelper makes CopyWorkspace copy through a helper container
	// even when it could copy on this host, between the volumes'
	// directories (the engine local, the hub root) or between bounded
	// workspaces' images. Default false: on the host when it can.
	CopyInHelper bool
}

// Driver is a sandbox.Driver on one Docker engine. It is safe for
// concurrent use; Close releases its connections.
type Driver struct {
	cli   *client.Client
	host  string
	log   *zap.Logger
	wsDir string // Options.WorkspaceDir, absolute
	fetch func(ctx context.Context, ref, tag string, w io.Writer) (bool, error)
	// loopControl is the loop control device (tests: one that is not).
	loopControl string

	mu      sync.Mutex
	wsOwned map[string]bool // image id → its /workspace is uid 1000's (no helper needed)
	helpers atomic.Int64    // workspace helper containers made (for tests)
	// copyInHelper is Options.CopyInHelper; hostCopies and imageCopies
	// count the workspace copies made on the host, file by file and as
	// file system images (for tests).
	copyInHelper bool
	hostCopies   atomic.Int64
	imageCopies  atomic.Int64
}

var _ sandbox.Driver = (*Driver)(nil)

// cleanupTimeout bounds the removals that undo a failed Create; they run
// even when the caller's context is done.
const cleanupTimeout = 30 * time.Second

// New returns a Driver for the engine opts names. It does not contact the
// engine: the API version is negotiated on the first request (Ping is a
// good one), so New succeeds while the engine is down.
func New(opts Options) (*Driver, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	copts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		copts = []client.Opt{client.WithHost(opts.Host)}
	}
	cli, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", opts.Host, err)
	}
	ws := opts.WorkspaceDir
	if ws != "" {
		// Absolute and without symlinks: compared with the kernel's
		// name of a loop device's backing file.
		if err := os.MkdirAll(ws, 0o700); err != nil {
			return nil, fmt.Errorf("workspace dir: %w", err)
		}
		if ws, err = filepath.Abs(ws); err == nil {
			ws, err = filepath.EvalSymlinks(ws)
		}
		if err != nil {
			return nil, fmt.Errorf("workspace dir: %w", err)
		}
	}
	return &Driver{cli: cli, host: cli.DaemonHost(), log: log.Named("docker"), wsDir: ws, loopControl: "/dev/loop-control", wsOwned: map[string]bool{},
		fetch: opts.Fetch, copyInHelper: opts.CopyInHelper}, nil
}

// Close releases the driver's idle connections to the engine.
func (d *Driver) Close() error { return d.cli.Close() }

// engineError is an engine failure that errors.Is matches against kind
// (sandbox.ErrUnavailable or sandbox.ErrNotFound) as well as the client's
// own error.
type engineError struct {
	msg  string
	kind error
	err  error
}

func (e *engineError) Error() string   { return e.msg + ": " + e.err.Error() }
func (e *engineError) Unwrap() []error { return []error{e.kind, e.err} }

// fail wraps a client error from op, classifying unreachable engines and
// missing objects for errors.Is.
func (d *Driver) fail(op string, err error) error {
	switch {
	case client.IsErrConnectionFailed(err):
		return &engineError{
			msg:  "docker engine at " + d.host + " is not reachable",
			kind: sandbox.ErrUnavailable,
			err:  err,
		}
	case cerrdefs.IsNotFound(err):
		return &engineError{msg: op, kind: sandbox.ErrNotFound, err: err}
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// Ping checks that the engine answers, negotiating the API version.
func (d *Driver) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return d.fail("ping", err)
	}
	return nil
}

// Runtimes lists the engine's runtimes and their arguments (docker info).
func (d *Driver) Runtimes(ctx context.Context) (map[string][]string, error) {
	res, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return nil, d.fail("engine info", err)
	}
	out := make(map[string][]string, len(res.Info.Runtimes))
	for name, rt := range res.Info.Runtimes {
		out[name] = rt.Args
	}
	return out, nil
}

// Start starts a created container; starting a running one is a no-op.
func (d *Driver) Start(ctx context.Context, id string) error {
	if _, err := d.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return d.fail("start container "+id, err)
	}
	// A sandbox on a network must not see its neighbours' names (dns.go):
	// one whose namespace cannot be closed to the embedded DNS is stopped.
	if res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil && userNetwork(string(res.Container.HostConfig.NetworkMode)) {
		if err := d.hideNames(ctx, id); err != nil {
			secs := 0
			_, _ = d.cli.ContainerStop(context.WithoutCancel(ctx), id, client.ContainerStopOptions{Timeout: &secs})
			return fmt.Errorf("start container %s: closing the engine's container-name DNS to it: %w", id, err)
		}
	}
	return nil
}

// Stop sends the container SIGTERM (its stop signal, set at Create) and
// SIGKILL once grace, rounded up to a second, has passed. Stopping a
// stopped container is a no-op.
func (d *Driver) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := max(0, int(math.Ceil(grace.Seconds())))
	if _, err := d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil {
		return d.fail("stop container "+id, err)
	}
	return nil
}

// Pause freezes the container's processes (docker pause); pausing a
// paused container is a no-op.
func (d *Driver) Pause(ctx context.Context, id string) error {
	if _, err := d.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		if res, ierr := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); ierr == nil && res.Container.State != nil && res.Container.State.Paused {
			return nil
		}
		return d.fail("pause container "+id, err)
	}
	return nil
}

// Unpause thaws a paused container (docker unpause); unpausing a running
// container is a no-op.
func (d *Driver) Unpause(ctx context.Context, id string) error {
	if _, err := d.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
		if res, ierr := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); ierr == nil && res.Container.State != nil &&
			res.Container.State.Running && !res.Container.State.Paused {
			return nil
		}
		return d.fail("unpause container "+id, err)
	}
	return nil
}

// Remove force-removes the container (with any anonymous volumes its image
// declared) and then its workspace volume. What is gone already is not an
// error; when the container is gone and id is its name, a workspace volume
// left behind by an earlier, interrupted Remove is removed.
func (d *Driver) Remove(ctx context.Context, id string) error {
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		if err := d.removeContainer(ctx, res.Container.ID); err != nil {
			return err
		}
		if vol := workspaceVolume(res.Container.Mounts); vol != "" {
			return d.removeVolume(ctx, vol)
		}
		return nil
	case cerrdefs.IsNotFound(err):
		return d.removeVolume(ctx, volumeName(strings.TrimPrefix(id, "/")))
	default:
		return d.fail("inspect container "+id, err)
	}
}

// removeContainer force-removes a container and its anonymous volumes;
// a missing container is not an error.
func (d *Driver) removeContainer(ctx context.Context, id string) error {
	_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return d.fail("remove container "+id, err)
	}
	return nil
}

// Volumes lists the volumes that carry every label in labels.
func (d *Driver) Volumes(ctx context.Context, labels map[string]string) ([]sandbox.Volume, error) {
	f := client.Filters{}
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	res, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, d.fail("list volumes", err)
	}
	vols := make([]sandbox.Volume, 0, len(res.Items))
	for _, v := range res.Items {
		vols = append(vols, sandbox.Volume{Name: v.Name, Labels: v.Labels})
	}
	return vols, nil
}

// RemoveVolume removes a volume; a missing volume is not an error.
func (d *Driver) RemoveVolume(ctx context.Context, name string) error {
	return d.removeVolume(ctx, name)
}

// removeVolume removes a volume, and then its bounded workspace's loop
// device and files, if it has them; a missing volume is not an error.
func (d *Driver) removeVolume(ctx context.Context, name string) error {
	_, err := d.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return d.fail("remove volume "+name, err)
	}
	return d.releaseWorkspace(name)
}

// workspaceVolume is the name of the volume mounted at the workspace, or "".
func workspaceVolume(mounts []container.MountPoint) string {
	for _, m := range mounts {
		if m.Type == mount.TypeVolume && m.Destination == sandbox.WorkspaceDir {
			return m.Name
		}
	}
	return ""
}

// Inspect describes one container.
func (d *Driver) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return sandbox.Info{}, d.fail("inspect container "+id, err)
	}
	return info(res.Container), nil
}

// List describes every container, running or not, that carries all of
// labels (key and value).
func (d *Driver) List(ctx context.Context, labels map[string]string) ([]sandbox.Info, error) {
	f := client.Filters{}
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, d.fail("list containers", err)
	}
	infos := make([]sandbox.Info, 0, len(res.Items))
	for _, c := range res.Items {
		// The summary lacks the start time, exit code and OOM flag.
		i, err := d.Inspect(ctx, c.ID)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, i)
	}
	return infos, nil
}

// info maps the engine's description of a container to a sandbox.Info.
func info(c container.InspectResponse) sandbox.Info {
	i := sandbox.Info{
		ID:      c.ID,
		Name:    strings.TrimPrefix(c.Name, "/"),
		ImageID: c.Image,
		State:   sandbox.StateOther,
	}
	if c.Config != nil {
		i.Image = c.Config.Image
		i.Labels = c.Config.Labels
	}
	if s := c.State; s != nil {
		switch s.Status {
		case container.StateCreated:
			i.State = sandbox.StateCreated
		case container.StateRunning:
			i.State = sandbox.StateRunning
		case container.StateExited:
			i.State = sandbox.StateExited
		case container.StatePaused:
			i.State = sandbox.StatePaused
		}
		i.ExitCode = s.ExitCode
		i.OOMKilled = s.OOMKilled
		i.Error = s.Error
		if t, err := time.Parse(time.RFC3339Nano, s.StartedAt); err == nil && t.Year() > 1 {
			i.StartedAt = t
		}
	}
	return i
}
