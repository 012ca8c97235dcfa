package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// roSuffix names the directory where MountWorkspace mounts a bounded
// workspace read-only: NAME.ro beside NAME.img.
const roSuffix = ".ro"

// ErrNoDirectWorkspace: the hub cannot read this engine's volumes
// directly (the engine is on another host, or the hub is not root); the
// caller reads the workspace through ExportWorkspace instead.
var ErrNoDirectWorkspace = errors.New("the workspace volume is not readable from this host")

// MountWorkspace gives the hub the workspace of a container that does not
// run as a host directory, read-only by promise (an unbounded volume is
// the engine's own directory) or by mount (a bounded one: its ext4 device
// mounted read-only, nodev, nosuid, noexec, beside its image). The caller
// calls release when done and must not write the directory. It needs the
// engine on this host and root: ErrNoDirectWorkspace otherwise.
func (d *Driver) MountWorkspace(ctx context.Context, id string) (dir string, release func() error, err error) {
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", nil, d.fail("inspect container "+id, err)
	}
	if st := res.Container.State; st != nil && (st.Running || st.Paused) {
		return "", nil, fmt.Errorf("mount the workspace of %s: the container runs", id)
	}
	vol := workspaceVolume(res.Container.Mounts)
	if vol == "" {
		return "", nil, fmt.Errorf("mount the workspace of %s: %w: no workspace volume", id, sandbox.ErrNotFound)
	}
	v, err := d.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
	if err != nil {
		return "", nil, d.fail("inspect volume "+vol, err)
	}
	nop := func() error { return nil }
	dev := v.Volume.Options["device"]
	if dev == "" { // a directory on the engine's disk
		if fi, err := os.Stat(v.Volume.Mountpoint); err != nil || !fi.IsDir() || os.Geteuid() != 0 {
			return "", nil, fmt.Errorf("volume %s at %q: %w", vol, v.Volume.Mountpoint, ErrNoDirectWorkspace)
		}
		return v.Volume.Mountpoint, nop, nil
	}
	img, own := d.workspaceFiles(vol)
	if d.wsDir == "" || dev != own || !fileExists(img) || os.Geteuid() != 0 {
		return "", nil, fmt.Errorf("volume %s on %s: %w", vol, dev, ErrNoDirectWorkspace)
	}
	mnt := strings.TrimSuffix(img, imgSuffix) + roSuffix
	d.unmountRO(mnt) // a hub killed while it read the last one
	if err := os.Mkdir(mnt, 0o700); err != nil && !os.IsExist(err) {
		return "", nil, fmt.Errorf("mount the workspace of %s: %w", id, err)
	}
	if err := unix.Mount(dev, mnt, "ext4", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		os.Remove(mnt)
		return "", nil, fmt.Errorf("mount the workspace of %s read-only: %w", id, err)
	}
	return mnt, func() error {
		if err := unix.Unmount(mnt, 0); err != nil {
			return fmt.Errorf("unmount the workspace of %s: %w", id, err)
		}
		return os.Remove(mnt)
	}, nil
}

// unmountRO removes a read-only mount MountWorkspace left (its hub was
// killed): the engine cannot mount the device read-write for the
// sandbox's start while it is mounted there.
func (d *Driver) unmountRO(mnt string) {
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err == nil {
		d.log.Info("removed a read-only workspace mount a killed hub left", zap.String("dir", mnt))
	}
	_ = os.Remove(mnt)
}

// unmountLeftovers removes every read-only workspace mount in the
// workspace directory (at start: what a killed hub left).
func (d *Driver) unmountLeftovers() {
	if d.wsDir == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(d.wsDir, "*"+roSuffix))
	for _, m := range dirs {
		d.unmountRO(m)
	}
}
