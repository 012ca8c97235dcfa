// Package sandboxfake is an in-memory sandbox.Driver for tests: containers,
// volumes and images are records in a map, and starting a container runs its
// command as a process on the host. A hub given this driver starts the real
// static agentd a Spec mounts (sandbox.AgentdDir/agentd from
// Spec.AgentdHostDir) in sandbox mode, which dials the hub's socket as it
// would from a container: the hub's sandbox paths run in a second, without
// Docker. It passes the conformance suite (internal/sandbox/drivertest).
//
// What it does NOT do, so that no test takes it for a sandbox:
//
//   - No isolation: the process runs on the host, as the test's user (root
//     when the tests run as root), in the host's file system, network, pid
//     and user namespaces. Spec.Network is recorded, not carried out; there
//     is no egress proxy, no read-only root, no dropped capabilities, no
//     seccomp, no init process.
//   - No limits: Spec.Limits (CPUs, memory, pids, /tmp and HOME sizes) are
//     ignored and nothing is ever OOM-killed. A Spec with a bounded workspace
//     (Limits.WorkspaceBytes) is refused, since the bound could not hold.
//   - No image contents: an image is a record (AddImage, or Options.Registry
//     for Pull); what the process finds are the host's programs, on the
//     host's PATH.
//   - No uid 1000: the workspace is chowned to 1000:1000 only when the test
//     runs as root, and the process keeps the test's uid either way.
//
// What it does in place of a container's mounts: each container has host
// directories for its workspace volume, its HOME and its /tmp (under
// Options.Dir), and the container paths of the Spec's mounts
// (sandbox.WorkspaceDir, HomeDir, AgentdDir, HubSocketDir, KeyDir) are
// rewritten to their host directories wherever they begin a path in the
// command's arguments and environment values: AGENTD_SANDBOX_HUB's
// unix:///run/agentd/hub.sock becomes the hub's own socket, the key file
// the hub's key mount. HOME (and XDG_*_HOME with Spec.Home), TMPDIR and
// PATH (the host's) are set as the Docker driver sets them. agentd's
// workspace is /workspace in sandbox mode and has no variable, so a command
// that is agentd's "run" without --workspace gets "--workspace DIR"
// appended.
//
// Like a container's, the process is a group of its own: Stop sends SIGTERM
// to the command's process, SIGKILL to its group after the grace period,
// and when the command exits what is left of its group is killed. Processes
// that left the group (agentd runs commands in sessions of their own) are
// out of reach once agentd is killed; agentd stopped with SIGTERM stops
// them itself.
package sandboxfake

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Options configure a Driver.
type Options struct {
	// Dir holds the containers' host directories (workspaces, homes, /tmp,
	// logs). Default: a new temporary directory, removed by Close.
	Dir string
	// Registry is what Pull can fetch, by reference; a pulled image
	// becomes local under that reference. Pull of any other reference
	// fails with ErrNotFound.
	Registry map[string]sandbox.Image
	// Now is the clock of start times. Default time.Now.
	Now func() time.Time
	// Runtimes are the runtimes the fake engine lists; Create refuses a
	// Spec.Runtime not among them. Default: "runc" alone. The fake runs
	// every container as a host process whatever its runtime.
	Runtimes []string
}

// Driver is the fake sandbox.Driver; safe for concurrent use. Close stops
// every process it started.
type Driver struct {
	dir      string
	ownDir   bool
	now      func() time.Time
	registry map[string]sandbox.Image
	runtimes []string

	mu          sync.Mutex
	images      map[string]sandbox.Image // by reference
	containers  map[string]*container    // by id
	volumes     map[string]*volume       // by name
	unavailable bool
	closed      bool
}

var _ sandbox.Driver = (*Driver)(nil)

type volume struct {
	name   string
	labels map[string]string
	dir    string
}

type container struct {
	id, name string
	spec     sandbox.Spec
	imageID  string
	labels   map[string]string
	vol      string // volume name
	dir      string // its home, tmp and log

	state     sandbox.State
	startedAt time.Time
	exitCode  int
	err       string
	proc      *os.Process
	done      chan struct{} // closed when proc has been reaped
}

// New returns a Driver with no images and no containers.
func New(opts Options) (*Driver, error) {
	d := &Driver{
		dir: opts.Dir, now: opts.Now, registry: maps.Clone(opts.Registry),
		images: map[string]sandbox.Image{}, containers: map[string]*container{}, volumes: map[string]*volume{},
	}
	if d.now == nil {
		d.now = time.Now
	}
	d.runtimes = slices.Clone(opts.Runtimes)
	if len(d.runtimes) == 0 {
		d.runtimes = []string{"runc"}
	}
	if d.dir == "" {
		// Short: agentd's own socket lives under a container's HOME and
		// a unix socket's path has a limit of about 100 bytes.
		dir, err := os.MkdirTemp("", "sbfake")
		if err != nil {
			return nil, err
		}
		d.dir, d.ownDir = dir, true
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, err
	}
	return d, nil
}

// Close kills every process the driver started and, when Options.Dir was
// not given, removes the containers' directories.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed = true
	type proc struct {
		p    *os.Process
		done chan struct{}
	}
	var running []proc // read under d.mu: reap clears c.proc
	for _, c := range d.containers {
		if c.proc != nil {
			running = append(running, proc{c.proc, c.done})
		}
	}
	d.mu.Unlock()
	for _, r := range running {
		killGroup(r.p)
		<-r.done
	}
	if d.ownDir {
		return os.RemoveAll(d.dir)
	}
	return nil
}

// AddImage makes img local under ref, as a build or a load would; an empty
// img.ID becomes "sha256:" and the hash of ref. It returns the image.
func (d *Driver) AddImage(ref string, img sandbox.Image) sandbox.Image {
	if img.ID == "" {
		sum := sha256.Sum256([]byte(ref))
		img.ID = "sha256:" + hex.EncodeToString(sum[:])
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.images[ref] = img
	return img
}

// SetUnavailable makes every method fail with ErrUnavailable (the engine
// is down) until it is called with false.
func (d *Driver) SetUnavailable(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unavailable = down
}

// Log returns what a container's process wrote to stdout and stderr, in
// all its runs.
func (d *Driver) Log(id string) (string, error) {
	d.mu.Lock()
	c := d.lookup(id)
	d.mu.Unlock()
	if c == nil {
		return "", fmt.Errorf("log of container %s: %w", id, sandbox.ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(c.dir, "log"))
	return string(b), err
}

// down is the error of a call while the engine is "unavailable"; d.mu held.
func (d *Driver) down(op string) error {
	if d.unavailable || d.closed {
		return fmt.Errorf("%s: fake engine: %w", op, sandbox.ErrUnavailable)
	}
	return nil
}

// Ping answers unless the driver is set unavailable or closed.
func (d *Driver) Ping(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.down("ping")
}

// Runtimes lists Options.Runtimes, without arguments.
func (d *Driver) Runtimes(context.Context) (map[string][]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down("engine info"); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, rt := range d.runtimes {
		out[rt] = nil
	}
	return out, nil
}

// image finds a local image by reference, id or repo digest; d.mu held.
func (d *Driver) image(ref string) (sandbox.Image, bool) {
	if img, ok := d.images[ref]; ok {
		return img, true
	}
	for _, img := range d.images {
		if img.ID == ref || slices.Contains(img.RepoDigests, ref) {
			return img, true
		}
	}
	return sandbox.Image{}, false
}

// Image describes a local image.
func (d *Driver) Image(_ context.Context, ref string) (sandbox.Image, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down("inspect image " + ref); err != nil {
		return sandbox.Image{}, err
	}
	img, ok := d.image(ref)
	if !ok {
		return sandbox.Image{}, fmt.Errorf("inspect image %s: %w", ref, sandbox.ErrNotFound)
	}
	return img, nil
}

// Pull makes the Registry's image ref local.
func (d *Driver) Pull(ctx context.Context, ref string) (sandbox.Image, error) {
	d.mu.Lock()
	err := d.down("pull " + ref)
	img, ok := d.registry[ref]
	d.mu.Unlock()
	if err != nil {
		return sandbox.Image{}, err
	}
	if !ok {
		return sandbox.Image{}, fmt.Errorf("pull %s: no such image in the fake registry: %w", ref, sandbox.ErrNotFound)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	return d.AddImage(ref, img), nil
}

// lookup finds a container by id or name; d.mu held.
func (d *Driver) lookup(ref string) *container {
	if c, ok := d.containers[ref]; ok {
		return c
	}
	ref = strings.TrimPrefix(ref, "/")
	for _, c := range d.containers {
		if c.name == ref {
			return c
		}
	}
	return nil
}

// hubLabelPrefix starts the hub's labels; an image's are not inherited (as
// the Docker driver does it: see docker.labels).
const hubLabelPrefix = "ai.devdepot.agentd."

// Create records the container and makes its workspace volume (a host
// directory) and its home; nothing runs.
func (d *Driver) Create(_ context.Context, s sandbox.Spec) (string, error) {
	switch {
	case s.Name == "" || strings.ContainsAny(s.Name, "/\\") || s.Name == "." || s.Name == "..":
		return "", fmt.Errorf("create sandbox %q: not a valid container name", s.Name)
	case len(s.Cmd) == 0:
		return "", fmt.Errorf("create sandbox %q: no command", s.Name)
	case s.Limits.WorkspaceBytes > 0:
		return "", fmt.Errorf("create sandbox %q: the fake driver cannot bound a workspace", s.Name)
	case s.Home != "" && !strings.HasPrefix(filepath.Clean(s.Home)+"/", sandbox.WorkspaceDir+"/"):
		return "", fmt.Errorf("create sandbox %q: home %q is not under %s", s.Name, s.Home, sandbox.WorkspaceDir)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down("create container " + s.Name); err != nil {
		return "", err
	}
	img, ok := d.image(s.Image)
	if !ok {
		return "", fmt.Errorf("inspect image %s: %w", s.Image, sandbox.ErrNotFound)
	}
	if s.Runtime != "" && !slices.Contains(d.runtimes, s.Runtime) {
		return "", fmt.Errorf("create container %s: fake engine: unknown or invalid runtime name: %s", s.Name, s.Runtime)
	}
	if d.lookup(s.Name) != nil {
		return "", fmt.Errorf("create container %s: the name is in use", s.Name)
	}
	volName := s.Name + "-workspace"
	if _, ok := d.volumes[volName]; ok {
		return "", fmt.Errorf("create volume %s: it exists already", volName)
	}
	id := newID()
	c := &container{
		id: id, name: s.Name, spec: s, imageID: img.ID, vol: volName,
		dir:   filepath.Join(d.dir, "c", id[:12]),
		state: sandbox.StateCreated,
	}
	c.labels = map[string]string{}
	for k, v := range img.Labels {
		if strings.HasPrefix(k, hubLabelPrefix) {
			v = ""
		}
		c.labels[k] = v
	}
	maps.Copy(c.labels, s.Labels)
	v := &volume{name: volName, labels: maps.Clone(s.Labels), dir: filepath.Join(d.dir, "v", id[:12])}
	if err := os.MkdirAll(v.dir, 0o755); err != nil {
		return "", fmt.Errorf("create volume %s: %w", volName, err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(v.dir, 1000, 1000); err != nil {
			os.RemoveAll(v.dir)
			return "", fmt.Errorf("create volume %s: %w", volName, err)
		}
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		os.RemoveAll(v.dir)
		return "", fmt.Errorf("create container %s: %w", s.Name, err)
	}
	d.volumes[volName] = v
	d.containers[id] = c
	return id, nil
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start runs the container's command as a host process; starting a
// running container is a no-op. HOME and /tmp are empty at each start, as
// a container's tmpfs mounts are.
func (d *Driver) Start(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down("start container " + id); err != nil {
		return err
	}
	c := d.lookup(id)
	if c == nil {
		return fmt.Errorf("start container %s: %w", id, sandbox.ErrNotFound)
	}
	if c.state == sandbox.StateRunning {
		return nil
	}
	vol := d.volumes[c.vol]
	if vol == nil {
		return fmt.Errorf("start container %s: its volume %s is gone", id, c.vol)
	}
	home, tmp := filepath.Join(c.dir, "home"), filepath.Join(c.dir, "tmp")
	for _, dir := range []string{home, tmp} {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("start container %s: %w", id, err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("start container %s: %w", id, err)
		}
	}
	argv, env := command(c.spec, paths{workspace: vol.dir, home: home, tmp: tmp})
	logf, err := os.OpenFile(filepath.Join(c.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = vol.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		// As an engine does with a command that does not exist.
		c.state, c.exitCode, c.err = sandbox.StateExited, 127, err.Error()
		return fmt.Errorf("start container %s: %w", id, err)
	}
	c.state, c.startedAt, c.exitCode, c.err = sandbox.StateRunning, d.now(), 0, ""
	c.proc, c.done = cmd.Process, make(chan struct{})
	go d.reap(c, cmd)
	return nil
}

// reap waits for the process, kills what is left of its group (a
// container's processes end with it) and records the exit.
func (d *Driver) reap(c *container, cmd *exec.Cmd) {
	err := cmd.Wait()
	killGroup(cmd.Process)
	code := exitCode(cmd.ProcessState)
	d.mu.Lock()
	defer d.mu.Unlock()
	c.state, c.exitCode, c.proc = sandbox.StateExited, code, nil
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		c.err = err.Error()
	}
	close(c.done)
}

// Stop sends the process SIGTERM and its group SIGKILL once grace has
// passed; stopping a container that does not run is a no-op.
func (d *Driver) Stop(ctx context.Context, id string, grace time.Duration) error {
	d.mu.Lock()
	err := d.down("stop container " + id)
	c := d.lookup(id)
	var proc *os.Process
	var done chan struct{}
	if c != nil {
		proc, done = c.proc, c.done
	}
	d.mu.Unlock()
	switch {
	case err != nil:
		return err
	case c == nil:
		return fmt.Errorf("stop container %s: %w", id, sandbox.ErrNotFound)
	case proc == nil:
		return nil
	}
	terminate(proc)
	continueGroup(proc) // a paused container gets its SIGTERM too
	d.mu.Lock()
	if c.state == sandbox.StatePaused && c.proc == proc {
		c.state = sandbox.StateRunning
	}
	d.mu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("stop container %s: %w", id, ctx.Err())
	}
	killGroup(proc)
	<-done
	return nil
}

// Pause stops the container's process group (SIGSTOP): as the cgroup
// freezer does, its processes keep their memory and get no CPU. Pausing a
// paused container is a no-op; one that does not run is an error.
func (d *Driver) Pause(_ context.Context, id string) error {
	return d.freeze(id, "pause", true)
}

// Unpause continues a paused container's process group (SIGCONT).
// Unpausing a running container is a no-op; one that does not run is an
// error.
func (d *Driver) Unpause(_ context.Context, id string) error {
	return d.freeze(id, "unpause", false)
}

func (d *Driver) freeze(id, op string, on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(op + " container " + id); err != nil {
		return err
	}
	c := d.lookup(id)
	switch {
	case c == nil:
		return fmt.Errorf("%s container %s: %w", op, id, sandbox.ErrNotFound)
	case c.proc == nil:
		return fmt.Errorf("%s container %s: it is not running", op, id)
	case on && c.state == sandbox.StateRunning:
		stopGroup(c.proc)
		c.state = sandbox.StatePaused
	case !on && c.state == sandbox.StatePaused:
		continueGroup(c.proc)
		c.state = sandbox.StateRunning
	}
	return nil
}

// Remove kills the container's process, forgets it, and removes its
// volume. What is gone is not an error; a name with no container removes
// the volume an interrupted Remove left (as the Docker driver does).
func (d *Driver) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	if err := d.down("remove container " + id); err != nil {
		d.mu.Unlock()
		return err
	}
	c := d.lookup(id)
	if c == nil {
		d.mu.Unlock()
		return d.RemoveVolume(ctx, strings.TrimPrefix(id, "/")+"-workspace")
	}
	proc, done := c.proc, c.done
	d.mu.Unlock()
	if proc != nil {
		killGroup(proc)
		<-done
	}
	d.mu.Lock()
	delete(d.containers, c.id)
	d.mu.Unlock()
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return d.RemoveVolume(ctx, c.vol)
}

// Inspect describes a container.
func (d *Driver) Inspect(_ context.Context, id string) (sandbox.Info, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down("inspect container " + id); err != nil {
		return sandbox.Info{}, err
	}
	c := d.lookup(id)
	if c == nil {
		return sandbox.Info{}, fmt.Errorf("inspect container %s: %w", id, sandbox.ErrNotFound)
	}
	return c.info(), nil
}

// info describes c; d.mu held.
func (c *container) info() sandbox.Info {
	return sandbox.Info{
		ID: c.id, Name: c.name, Image: c.spec.Image, ImageID: c.imageID, Labels: maps.Clone(c.labels),
		State: c.state, StartedAt: c.startedAt, ExitCode: c.exitCode, Error: c.err,
	}
}

// List describes the containers that carry every label in labels.
func (d *Driver) List(_ context.Context, labels map[string]string) ([]sandbox.Info, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down("list containers"); err != nil {
		return nil, err
	}
	var out []sandbox.Info
	for _, c := range d.containers {
		if carries(c.labels, labels) {
			out = append(out, c.info())
		}
	}
	return out, nil
}

// Volumes lists the volumes that carry every label in labels.
func (d *Driver) Volumes(_ context.Context, labels map[string]string) ([]sandbox.Volume, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down("list volumes"); err != nil {
		return nil, err
	}
	var out []sandbox.Volume
	for _, v := range d.volumes {
		if carries(v.labels, labels) {
			out = append(out, sandbox.Volume{Name: v.name, Labels: maps.Clone(v.labels)})
		}
	}
	return out, nil
}

// RemoveVolume removes a volume and its directory; a gone volume is not an
// error, one a container still has is.
func (d *Driver) RemoveVolume(_ context.Context, name string) error {
	d.mu.Lock()
	if err := d.down("remove volume " + name); err != nil {
		d.mu.Unlock()
		return err
	}
	v := d.volumes[name]
	if v == nil {
		d.mu.Unlock()
		return nil
	}
	for _, c := range d.containers {
		if c.vol == name {
			d.mu.Unlock()
			return fmt.Errorf("remove volume %s: in use by container %s", name, c.id)
		}
	}
	delete(d.volumes, name)
	d.mu.Unlock()
	if err := os.RemoveAll(v.dir); err != nil {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}

// carries reports whether have has every label of want.
func carries(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Stats sums what the container's process group uses, from /proc (Linux;
// elsewhere zeros): CPU, resident memory (shared pages counted in each
// process) and threads. Its limits are 0, since the fake enforces none, and
// so is its network traffic, the host's own.
func (d *Driver) Stats(_ context.Context, id string) (sandbox.Stats, error) {
	d.mu.Lock()
	if err := d.down("stats of container " + id); err != nil {
		d.mu.Unlock()
		return sandbox.Stats{}, err
	}
	c := d.lookup(id)
	if c == nil {
		d.mu.Unlock()
		return sandbox.Stats{}, fmt.Errorf("stats of container %s: %w", id, sandbox.ErrNotFound)
	}
	if (c.state != sandbox.StateRunning && c.state != sandbox.StatePaused) || c.proc == nil {
		d.mu.Unlock()
		return sandbox.Stats{}, nil
	}
	pid := c.proc.Pid
	d.mu.Unlock()
	now := time.Now() // not Options.Now: CPU is per wall-clock second
	cpu, rss, threads := groupUsage(pid)
	return sandbox.Stats{Read: now, CPUNanos: cpu, MemoryBytes: rss, Pids: threads}, nil
}
