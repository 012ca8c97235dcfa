package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker/seccomp"
)

// The sandbox user's numeric ids; sandbox.ContainerUser is "uid:gid".
const (
	uid = 1000
	gid = 1000
)

// Suffixes of the names Create derives from Spec.Name.
const (
	// volumeSuffix names the workspace volume: NAME-workspace.
	volumeSuffix = "-workspace"
	// initSuffix names the short-lived container that sets the workspace
	// volume's owner during Create: NAME-volinit. It carries the spec's
	// labels, so one orphaned by a crash is reaped like a sandbox.
	initSuffix = "-volinit"
)

// gvisorTasks are the host tasks a gVisor sandbox's sentry and gofer take
// on top of the sandbox's own processes (ptrace platform: a host thread per
// sandbox thread plus the Go runtime's).
const gvisorTasks = 256

// Log limits: the sandbox's own output is not the hub's record of it.
const (
	logMaxSize  = "1m"
	logMaxFiles = "1"
)

func volumeName(name string) string { return name + volumeSuffix }

// validName is the engine's rule for container and volume names.
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// validate refuses a spec that would leave a limit or a choice to the
// engine's defaults, which are weaker.
func validate(s sandbox.Spec) error {
	var errs []error
	if !validName.MatchString(s.Name) {
		errs = append(errs, fmt.Errorf("name %q is not a valid container name", s.Name))
	}
	if s.Image == "" {
		errs = append(errs, errors.New("no image"))
	}
	if len(s.Cmd) == 0 {
		errs = append(errs, errors.New("no command"))
	}
	if s.Network == "" {
		errs = append(errs, errors.New("no network (\"none\" or a network name)"))
	}
	if userNetwork(s.Network) {
		if _, err := hostResolvConf(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range []struct{ name, dir string }{
		{"agentd host dir", s.AgentdHostDir},
		{"hub socket host dir", s.HubSocketHostDir},
		{"key host dir", s.KeyHostDir},
		{"CA host dir", s.CAHostDir},
	} {
		if p.dir != "" && !filepath.IsAbs(p.dir) {
			errs = append(errs, fmt.Errorf("%s %q is not absolute", p.name, p.dir))
		}
	}
	if s.Home != "" && (path.Clean(s.Home) != s.Home || !strings.HasPrefix(s.Home, sandbox.WorkspaceDir+"/")) {
		errs = append(errs, fmt.Errorf("home %q is not a clean path under %s", s.Home, sandbox.WorkspaceDir))
	}
	l := s.Limits
	if !(l.CPUs > 0) || l.MemoryBytes <= 0 || l.Pids <= 0 || l.TmpBytes <= 0 || l.HomeBytes <= 0 {
		errs = append(errs, fmt.Errorf("limits must all be positive: %+v", l))
	}
	return errors.Join(errs...)
}

// Create creates the workspace volume (owned by uid 1000, see the package
// doc) and the hardened container, and returns the container's id. The
// image must be local (ErrNotFound otherwise), and the name and its volume
// free. Any warning from the engine (it would discard a limit, say) fails
// it. When it fails, it removes what it made.
func (d *Driver) Create(ctx context.Context, s sandbox.Spec) (id string, err error) {
	if err := validate(s); err != nil {
		return "", fmt.Errorf("create sandbox %q: %w", s.Name, err)
	}
	s.Image = d.local(ctx, s.Image)
	// The container would inherit the image's labels: see labels.
	img, err := d.cli.ImageInspect(ctx, s.Image)
	if err != nil {
		return "", d.fail("inspect image "+s.Image, err)
	}
	var imageLabels map[string]string
	if img.Config != nil {
		imageLabels = img.Config.Labels
	}
	cs := s // the container's spec; the volume takes s.Labels as they are
	cs.Labels = labels(s.Labels, imageLabels)

	var undo []func(context.Context) error
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](cctx); uerr != nil {
				d.log.Warn("undo a failed create", zap.String("name", s.Name), zap.Error(uerr))
			}
		}
	}()

	vol := volumeName(s.Name)
	if s.Limits.WorkspaceBytes > 0 {
		err = d.createBoundedVolume(ctx, vol, s.Labels, s.Limits.WorkspaceBytes)
	} else {
		err = d.createVolume(ctx, vol, s.Labels, nil)
	}
	if err != nil {
		return "", err
	}
	undo = append(undo, func(ctx context.Context) error { return d.removeVolume(ctx, vol) })

	// An image whose /workspace uid 1000 owns already needs no helper:
	// the sandbox container's own copy-up gives the volume that owner.
	copyUp := d.ownsWorkspace(img.ID)
	if !copyUp {
		owned, err := d.ownWorkspace(ctx, s.Name+initSuffix, s.Image, vol, cs.Labels)
		if err != nil {
			return "", err
		}
		if owned {
			d.mu.Lock()
			d.wsOwned[img.ID] = true
			d.mu.Unlock()
		}
	}

	res, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       s.Name,
		Config:     containerConfig(cs),
		HostConfig: hostConfig(s, vol, copyUp),
	})
	if err != nil {
		return "", d.fail("create container "+s.Name, err)
	}
	undo = append(undo, func(ctx context.Context) error { return d.removeContainer(ctx, res.ID) })
	if len(res.Warnings) > 0 {
		return "", fmt.Errorf("create container %s: the engine would not carry out the spec exactly: %s",
			s.Name, strings.Join(res.Warnings, "; "))
	}
	d.log.Debug("created", zap.String("name", s.Name), zap.String("id", res.ID), zap.String("image", s.Image))
	return res.ID, nil
}

// hubLabelPrefix starts every label the hub puts on sandboxes (sandbox.Label*
// but the base image's).
const hubLabelPrefix = "ai.devdepot.agentd."

// labels are the container's labels: the spec's, and "" for every hub label
// the image has and the spec does not. The engine gives a container its
// image's labels unless the container sets them; without this an image
// labelled, say, sandbox.LabelWarm=1 would pass for a warm-pool sandbox.
func labels(spec, image map[string]string) map[string]string {
	out := maps.Clone(spec)
	for k := range image {
		if _, ok := spec[k]; !ok && strings.HasPrefix(k, hubLabelPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = ""
		}
	}
	return out
}

// createVolume creates a new named volume. The engine answers a create for
// an existing name with that volume, which may not be ours: refuse it.
// driverOpts are the local driver's options ("type", "device", "o"; nil:
// a directory on the engine's disk).
func (d *Driver) createVolume(ctx context.Context, name string, volLabels, driverOpts map[string]string) error {
	_, err := d.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case err == nil:
		return fmt.Errorf("create volume %s: %w", name, cerrdefs.ErrAlreadyExists)
	case !cerrdefs.IsNotFound(err):
		return d.fail("inspect volume "+name, err)
	}
	if _, err := d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: volLabels, Driver: "local", DriverOpts: driverOpts}); err != nil {
		return d.fail("create volume "+name, err)
	}
	return nil
}

// ownsWorkspace reports whether the image is known to have a /workspace
// that uid and gid 1000 own.
func (d *Driver) ownsWorkspace(imageID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.wsOwned[imageID]
}

// ownWorkspace makes uid 1000 the owner of the volume's root, through a
// helper container that is never started (why: the package doc). It
// reports whether the image's own /workspace had that owner already (the
// volume's root as the copy-up left it), so that the next sandbox of the
// image can do without the helper.
func (d *Driver) ownWorkspace(ctx context.Context, name, image, vol string, ctrLabels map[string]string) (owned bool, err error) {
	d.helpers.Add(1)
	res, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:           image,
			Entrypoint:      []string{"/never-started"},
			Labels:          ctrLabels,
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode: "none",
			// Copy-up on: the image's /workspace content, if any, lands
			// in the volume now.
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: sandbox.WorkspaceDir}},
		},
	})
	if err != nil {
		return false, d.fail("create workspace init container "+name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		// Until it is gone it holds the volume.
		if rerr := d.removeContainer(cctx, res.ID); rerr != nil && err == nil {
			err = rerr
		}
	}()
	owned, err = d.rootOwner(ctx, res.ID)
	if err != nil {
		return false, d.fail("read the owner of volume "+vol, err)
	}
	_, err = d.cli.CopyToContainer(ctx, res.ID, client.CopyToContainerOptions{
		DestinationPath: "/",
		Content:         bytes.NewReader(ownerArchive()),
	})
	if err != nil {
		return false, d.fail("set the owner of volume "+vol, err)
	}
	return owned, nil
}

// rootOwner reports whether the container's /workspace is a directory that
// uid and gid 1000 own, from the archive API's first entry.
func (d *Driver) rootOwner(ctx context.Context, id string) (bool, error) {
	res, err := d.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: sandbox.WorkspaceDir})
	if err != nil {
		return false, err
	}
	defer res.Content.Close()
	h, err := tar.NewReader(res.Content).Next()
	if err != nil {
		return false, err
	}
	return h.Typeflag == tar.TypeDir && h.Uid == uid && h.Gid == gid, nil
}

// ownerArchive is a tar of one entry, the workspace directory owned by the
// sandbox user, for extraction at "/".
func ownerArchive() []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// Writes to a bytes.Buffer do not fail.
	_ = tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir,
		Name:     strings.TrimPrefix(sandbox.WorkspaceDir, "/") + "/",
		Mode:     0o755,
		Uid:      uid,
		Gid:      gid,
		ModTime:  time.Now(),
		Format:   tar.FormatPAX,
	})
	_ = tw.Close()
	return buf.Bytes()
}

// containerConfig is the sandbox container's config: the sandbox user
// whatever the image's USER, the spec's command instead of the image's
// entrypoint and cmd, the image's healthcheck off.
func containerConfig(s sandbox.Spec) *container.Config {
	env := make([]string, 0, len(s.Env)+1)
	for _, e := range s.Env {
		if !strings.HasPrefix(e, "HOME=") {
			env = append(env, e)
		}
	}
	if s.Home != "" {
		env = append(env, "HOME="+s.Home,
			"XDG_CONFIG_HOME="+s.Home+"/.config", "XDG_CACHE_HOME="+s.Home+"/.cache",
			"XDG_DATA_HOME="+s.Home+"/.local/share", "XDG_STATE_HOME="+s.Home+"/.local/state")
	} else {
		env = append(env, "HOME="+sandbox.HomeDir)
	}
	return &container.Config{
		Image:       s.Image,
		User:        sandbox.ContainerUser,
		Env:         env,
		Entrypoint:  s.Cmd,
		WorkingDir:  sandbox.WorkspaceDir,
		Labels:      s.Labels,
		StopSignal:  "SIGTERM",
		Healthcheck: &container.HealthConfig{Test: []string{"NONE"}},
	}
}

// hostConfig is the sandbox container's hardening, limits and mounts;
// copyUp lets the engine copy the image's /workspace into the empty volume
// (when the image's is owned by the sandbox user; else the helper did).
func hostConfig(s sandbox.Spec, vol string, copyUp bool) *container.HostConfig {
	mounts := []mount.Mount{{
		Type:          mount.TypeVolume,
		Source:        vol,
		Target:        sandbox.WorkspaceDir,
		VolumeOptions: &mount.VolumeOptions{NoCopy: !copyUp},
	}}
	for _, b := range []struct{ host, target string }{
		{s.AgentdHostDir, sandbox.AgentdDir},
		{s.HubSocketHostDir, sandbox.HubSocketDir},
		{s.CAHostDir, sandbox.CADir},
	} {
		if b.host != "" {
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b.host, Target: b.target, ReadOnly: true})
		}
	}
	if userNetwork(s.Network) {
		if rc, err := hostResolvConf(); err == nil { // else Create refuses (validate)
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: rc, Target: "/etc/resolv.conf", ReadOnly: true})
		}
	}
	if s.KeyHostDir != "" {
		// Writable: agentd removes the key once read.
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: s.KeyHostDir, Target: sandbox.KeyDir})
	}
	pids := s.Limits.Pids
	if s.Runtime == sandbox.RuntimeGVisor || s.Runtime == sandbox.RuntimeGVisorNet {
		// The engine's pids limit counts host tasks, and gVisor's sentry
		// and gofer are host threads in the container's cgroup: without
		// room for them a sandbox of 64 could not fork its fourth process.
		pids += gvisorTasks
	}
	withInit := true
	return &container.HostConfig{
		Runtime:        s.Runtime,
		Init:           &withInit,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", "seccomp=" + seccomp.Profile()},
		Resources: container.Resources{
			PidsLimit:  &pids,
			Memory:     s.Limits.MemoryBytes,
			MemorySwap: s.Limits.MemoryBytes,
			NanoCPUs:   int64(math.Round(s.Limits.CPUs * 1e9)),
		},
		Tmpfs:         tmpfs(s.Limits),
		Mounts:        mounts,
		NetworkMode:   container.NetworkMode(s.Network),
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": logMaxSize, "max-file": logMaxFiles},
		},
	}
}

// tmpfs are the /tmp and HOME mounts, exec-able and sized; HOME is the
// sandbox user's alone.
func tmpfs(l sandbox.Limits) map[string]string {
	return map[string]string{
		"/tmp": fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=1777", l.TmpBytes),
		sandbox.HomeDir: fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=0700,uid=%d,gid=%d",
			l.HomeBytes, uid, gid),
	}
}
