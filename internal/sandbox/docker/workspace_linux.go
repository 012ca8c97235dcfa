package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// A bounded workspace is an ext4 filesystem in a sparse file, on a loop
// device, mounted by the engine's local volume driver (type ext4, the
// device a symlink to the loop device). Its files, in Options.WorkspaceDir,
// per volume NAME:
//
//	NAME.img  the filesystem (sparse: it takes what the sandbox wrote)
//	NAME.dev  a symlink to /dev/loopN, the volume's device
//
// Why these pieces: the local driver mounts with mount(2), not mount(8),
// so its "o=loop" does nothing (ext4 refuses a regular file); the device
// must be a block device, attached by the hub. It is named through a
// symlink the hub owns so that a device number that changes (the host
// rebooted, the loop devices went) is repointed by Recover, and a volume
// never mounts whatever another workspace holds /dev/loopN by then.
//
// The image, its device and its frozen copy are package loopfs's, shared
// with the Kubernetes driver.
const (
	imgSuffix = ".img"
	devSuffix = ".dev"
)

// ErrNoLoopDevice: the host has no loop device to give a workspace.
var ErrNoLoopDevice = loopfs.ErrNoLoopDevice

// workspaceFiles are a volume's image and device symlink.
func (d *Driver) workspaceFiles(vol string) (img, dev string) {
	base := filepath.Join(d.wsDir, vol)
	return base + imgSuffix, base + devSuffix
}

// createBoundedVolume makes a volume whose content cannot exceed size
// bytes: the filesystem image (root owned by the sandbox user, no
// lost+found, so that copy-up still sees an empty volume), its loop
// device, and the engine's volume on it. What it made is removed when it
// fails.
func (d *Driver) createBoundedVolume(ctx context.Context, vol string, labels map[string]string, size int64) (err error) {
	if d.wsDir == "" {
		return fmt.Errorf("create volume %s: a workspace size limit needs the driver's WorkspaceDir (the engine must be on this host)", vol)
	}
	img, dev := d.workspaceFiles(vol)
	if err := os.MkdirAll(d.wsDir, 0o700); err != nil {
		return fmt.Errorf("workspace dir: %w", err)
	}
	if err := loopfs.Make(ctx, img, size, uid, gid); err != nil {
		return fmt.Errorf("create volume %s: %w", vol, err)
	}
	defer func() {
		if err != nil {
			d.releaseWorkspace(vol)
		}
	}()
	if _, err := loopfs.Attach(d.loopControl, img, dev); err != nil {
		return fmt.Errorf("create volume %s: %w", vol, err)
	}
	return d.createVolume(ctx, vol, labels, map[string]string{"type": "ext4", "device": dev, "o": "nodev,nosuid"})
}

// releaseWorkspace detaches a volume's loop device and deletes its files
// (after the engine removed the volume, or a create failed):
// loopfs.Release, which also unmounts a mount the engine left. Nothing
// there is not an error.
func (d *Driver) releaseWorkspace(vol string) error {
	if d.wsDir == "" {
		return nil
	}
	img, dev := d.workspaceFiles(vol)
	if err := loopfs.Release(img, dev); err != nil {
		return fmt.Errorf("release workspace %s: %w", vol, err)
	}
	return nil
}

// RecoverWorkspaces brings WorkspaceDir in line with the engine, after a
// crash or a reboot: a workspace whose volume is gone is released (loop
// device and files); one whose volume is there gets its loop device back
// (the host restarted) and its symlink pointed at it. Run it at start,
// before any sandbox starts.
func (d *Driver) RecoverWorkspaces(ctx context.Context) error {
	if d.wsDir == "" {
		return nil
	}
	d.unmountLeftovers()
	imgs, err := filepath.Glob(filepath.Join(d.wsDir, "*"+imgSuffix))
	if err != nil {
		return err
	}
	var errs []error
	var devs []string
	defer func() { thawAll(devs) }() // a copyImage cut short left its source frozen
	for _, img := range imgs {
		vol := strings.TrimSuffix(filepath.Base(img), imgSuffix)
		_, dev := d.workspaceFiles(vol)
		_, err := d.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			d.log.Info("releasing a workspace whose volume is gone", zap.String("volume", vol))
			errs = append(errs, d.releaseWorkspace(vol))
		case err != nil:
			errs = append(errs, d.fail("inspect volume "+vol, err))
		case loopfs.LoopOf(img, dev) == "":
			path, err := loopfs.Attach(loopfs.LoopControl, img, dev)
			if err != nil {
				errs = append(errs, fmt.Errorf("workspace %s: %w", vol, err))
				continue
			}
			d.log.Info("workspace attached again", zap.String("volume", vol), zap.String("device", path))
		default:
			devs = append(devs, loopfs.LoopOf(img, dev))
		}
	}
	// Symlinks and temporary links left without an image.
	links, _ := filepath.Glob(filepath.Join(d.wsDir, "*"+devSuffix+"*"))
	for _, l := range links {
		vol := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(l), ".new"), devSuffix)
		if img, _ := d.workspaceFiles(vol); !fileExists(img) {
			_ = os.Remove(l)
		}
	}
	return errors.Join(errs...)
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
