package kube

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// A bounded hostPath workspace (a spec with Limits.WorkspaceBytes) is an
// ext4 file system in a sparse image file on a loop device, as under the
// Docker driver (package loopfs), mounted by the driver at the directory
// the PersistentVolume names: the kubelet bind-mounts that directory into
// the Pod, so the sandbox writes into the file system and gets ENOSPC at
// its size. Beside the directory DIR, per claim:
//
//	DIR.img  the file system (sparse: it takes what the sandbox wrote)
//	DIR.dev  a symlink to /dev/loopN, the image's device
//
// The mount is the hub's, in the host's mount namespace (the kubelet's
// here): it is made at Create and again whenever it is missing — at Start,
// before a workspace call, and by RecoverWorkspaces when the hub starts
// (a reboot took the loop devices and mounts). Remove unmounts it,
// detaches the device and deletes the image.
const (
	imgSuffix = ".img"
	devSuffix = ".dev"
)

// imageFiles are the image and device symlink of a claim's workspace.
func (d *Driver) imageFiles(claim string) (img, dev string) {
	base := d.hostDirOf(claim)
	return base + imgSuffix, base + devSuffix
}

// bounded reports whether a claim's hostPath workspace is an ext4 image.
func (d *Driver) bounded(claim string) bool {
	if d.hostDir == "" {
		return false
	}
	img, _ := d.imageFiles(claim)
	_, err := os.Lstat(img)
	return err == nil
}

// makeBounded makes the directory of a claim's workspace the mount point
// of a new ext4 image of size bytes, its root the sandbox user's. What it
// made is left for releaseBounded (Create's undo) when it fails.
func (d *Driver) makeBounded(ctx context.Context, claim string, size int64) error {
	dir := d.hostDirOf(claim)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	img, _ := d.imageFiles(claim)
	if err := loopfs.Make(ctx, img, size, uid, gid); err != nil {
		return err
	}
	return d.mountBounded(claim)
}

// mountBounded makes sure a bounded workspace is attached to a loop device
// and mounted at its directory.
func (d *Driver) mountBounded(claim string) error {
	dir := d.hostDirOf(claim)
	img, dev := d.imageFiles(claim)
	loop := loopfs.LoopOf(img, dev)
	if loop == "" {
		var err error
		if loop, err = loopfs.Attach(d.loopControl, img, dev); err != nil {
			return fmt.Errorf("workspace %s: %w", claim, err)
		}
		d.log.Info("workspace attached", zap.String("claim", claim), zap.String("device", loop))
	}
	mp, err := loopfs.MountOf(loop)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", claim, err)
	}
	switch mp {
	case dir:
		return nil
	case "":
	default:
		return fmt.Errorf("workspace %s: its device %s is mounted at %s, not %s", claim, loop, mp, dir)
	}
	if err := loopfs.Mount(loop, dir); err != nil {
		return fmt.Errorf("workspace %s: %w", claim, err)
	}
	return nil
}

// unmountBounded unmounts a bounded workspace's directory, if it is
// mounted there.
func (d *Driver) unmountBounded(claim string) error {
	img, dev := d.imageFiles(claim)
	loop := loopfs.LoopOf(img, dev)
	if loop == "" {
		return nil
	}
	if mp, err := loopfs.MountOf(loop); err != nil || mp == "" {
		return err
	}
	return loopfs.Unmount(d.hostDirOf(claim))
}

// releaseBounded unmounts a bounded workspace, detaches its loop device and
// deletes its image and symlink (loopfs.Release). Nothing there is not an
// error.
func (d *Driver) releaseBounded(claim string) error {
	if d.hostDir == "" {
		return nil
	}
	img, dev := d.imageFiles(claim)
	if err := loopfs.Release(img, dev); err != nil {
		return fmt.Errorf("release workspace %s: %w", claim, err)
	}
	return nil
}

// RecoverWorkspaces brings the bounded hostPath workspaces of the
// namespace in line with the cluster when the hub starts, before any
// sandbox does: one whose volume is still there gets its loop device and
// mount back (the host rebooted; a restarted hub finds them in place) and
// is thawed; one whose volume is gone (its removal cut short) is released.
func (d *Driver) RecoverWorkspaces(ctx context.Context) error {
	if d.hostDir == "" {
		return nil
	}
	imgs, err := filepath.Glob(filepath.Join(d.hostDir, d.ns, "*"+imgSuffix))
	if err != nil {
		return err
	}
	var errs []error
	for _, img := range imgs {
		claim := strings.TrimSuffix(filepath.Base(img), imgSuffix)
		_, err := d.cs.CoreV1().PersistentVolumes().Get(ctx, d.pvName(claim), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			d.log.Info("releasing a workspace whose volume is gone", zap.String("claim", claim))
			errs = append(errs, d.releaseBounded(claim))
			if err := os.Remove(d.hostDirOf(claim)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		case err != nil:
			errs = append(errs, d.fail("read workspace volume "+d.pvName(claim), err))
		default:
			err := d.mountBounded(claim)
			if err == nil {
				loopfs.Thaw(d.hostDirOf(claim)) // a hub that died during a copy left it frozen
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
