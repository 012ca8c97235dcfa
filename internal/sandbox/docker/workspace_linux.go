package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/sandbox"
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
const (
	imgSuffix = ".img"
	devSuffix = ".dev"
	// minWorkspaceBytes: ext4's own structures need a few MiB.
	minWorkspaceBytes = 16 << 20
)

// ErrNoLoopDevice: the host has no loop device to give a workspace.
var ErrNoLoopDevice = fmt.Errorf("no free loop device: %w", sandbox.ErrExhausted)

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
	if size < minWorkspaceBytes {
		return fmt.Errorf("create volume %s: workspace size %d: want at least %d MiB", vol, size, minWorkspaceBytes>>20)
	}
	img, dev := d.workspaceFiles(vol)
	if err := os.MkdirAll(d.wsDir, 0o700); err != nil {
		return fmt.Errorf("workspace dir: %w", err)
	}
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create volume %s: %w", vol, err)
	}
	defer func() {
		if err != nil {
			d.releaseWorkspace(vol)
		}
	}()
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create volume %s: %w", vol, err)
	}
	if err := mkfs(ctx, img, size); err != nil {
		return fmt.Errorf("create volume %s: %w", vol, err)
	}
	if _, err := attachVia(d.loopControl, img, dev); err != nil {
		return fmt.Errorf("create volume %s: %w", vol, err)
	}
	return d.createVolume(ctx, vol, labels, map[string]string{"type": "ext4", "device": dev, "o": "nodev,nosuid"})
}

// mkfs makes the ext4 filesystem: no blocks reserved for root (the
// sandbox user gets all of it), its root the sandbox user's, and no
// lost+found (a non-empty volume gets no copy-up of the image's
// /workspace). A journal of 16 MiB at most: mkfs's default for 10 GiB,
// 64 MiB, is host disk every empty workspace would take.
func mkfs(ctx context.Context, img string, size int64) error {
	args := []string{"-q", "-F", "-m", "0", "-E", fmt.Sprintf("root_owner=%d:%d,nodiscard", uid, gid)}
	if size >= 1<<30 {
		args = append(args, "-J", "size=16")
	}
	out, err := exec.CommandContext(ctx, "mkfs.ext4", append(args, img)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 (e2fsprogs): %w: %s", err, strings.TrimSpace(string(out)))
	}
	out, err = exec.CommandContext(ctx, "debugfs", "-w", "-R", "rmdir lost+found", img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("debugfs (e2fsprogs): %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// attach gives img a free loop device and points dev at it; it returns
// the device's path.
func attach(img, dev string) (string, error) {
	return attachVia("/dev/loop-control", img, dev)
}

// attachVia is attach with the loop control device at loopControl.
func attachVia(loopControl, img, dev string) (string, error) {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	ctl, err := os.OpenFile(loopControl, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoLoopDevice, err)
	}
	defer ctl.Close()
	// Another process may take the free device between the two calls:
	// then LOOP_CONFIGURE says EBUSY and the next free one is tried.
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("%w (LOOP_CTL_GET_FREE: %w): detach unused ones (losetup -D) or load the loop module with a higher max_loop", ErrNoLoopDevice, err)
		}
		path := "/dev/loop" + strconv.Itoa(n)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			// No devtmpfs: make the node.
			if err := unix.Mknod(path, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", fmt.Errorf("make %s: %w", path, err)
			}
		}
		lo, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return "", fmt.Errorf("open %s: %w", path, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img)
		err = unix.IoctlLoopConfigure(int(lo.Fd()), &cfg)
		lo.Close()
		if errors.Is(err, unix.EBUSY) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("attach %s to %s: %w", img, path, err)
		}
		tmp := dev + ".new"
		_ = os.Remove(tmp)
		if err = os.Symlink(path, tmp); err == nil {
			err = os.Rename(tmp, dev)
		}
		if err != nil {
			_ = detach(path)
			return "", fmt.Errorf("link %s: %w", dev, err)
		}
		return path, nil
	}
	return "", fmt.Errorf("%w: every free one was taken meanwhile", ErrNoLoopDevice)
}

// detach frees a loop device (once the engine no longer mounts it).
func detach(path string) error {
	lo, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer lo.Close()
	if err := unix.IoctlSetInt(int(lo.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detach %s: %w", path, err)
	}
	return nil
}

// backing is the file a loop device is attached to ("" if none).
func backing(path string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(path), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
}

// loopOf is the loop device that dev points at and that holds img, or "".
func loopOf(img, dev string) string {
	path, err := os.Readlink(dev)
	if err != nil || !strings.HasPrefix(path, "/dev/loop") {
		return ""
	}
	if backing(path) != img {
		return ""
	}
	return path
}

// releaseWorkspace detaches a volume's loop device and deletes its files
// (after the engine removed the volume, or a create failed). Nothing
// there is not an error.
func (d *Driver) releaseWorkspace(vol string) error {
	if d.wsDir == "" {
		return nil
	}
	img, dev := d.workspaceFiles(vol)
	var errs []error
	if path := loopOf(img, dev); path != "" {
		errs = append(errs, detach(path))
	}
	for _, p := range []string{dev, img} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
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
		case loopOf(img, dev) == "":
			path, err := attach(img, dev)
			if err != nil {
				errs = append(errs, fmt.Errorf("workspace %s: %w", vol, err))
				continue
			}
			d.log.Info("workspace attached again", zap.String("volume", vol), zap.String("device", path))
		default:
			devs = append(devs, loopOf(img, dev))
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
