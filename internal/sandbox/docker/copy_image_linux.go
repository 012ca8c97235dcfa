package docker

import (
	"context"
	"os"

	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// copyImage copies a bounded workspace (workspace_linux.go) as its
// filesystem image, sparsely: only the extents the source's image holds,
// with copy_file_range, into the destination's image, which the
// destination's loop device then reads afresh. No file-by-file walk and no
// helper container; it keeps everything the file system holds (owners,
// modes, times, links, sparse files, extended attributes), because it is
// the file system.
//
// The source is frozen (FIFREEZE) for the copy when it is mounted (its
// container runs or is paused): ext4 then writes out every dirty block
// and its journal, so that the image is a clean file system; it is thawed
// afterwards. The destination must not be mounted: its device is held
// open exclusively meanwhile, so that nothing mounts it during the copy.
//
// ok false (and nil): not a pair this can copy — not both bounded
// workspaces of this driver, images of different sizes, or a source
// mounted where this process cannot see it (another mount namespace) —
// and nothing was changed: the caller copies file by file.
func (d *Driver) copyImage(ctx context.Context, srcVol, dstVol string) (ok bool, err error) {
	if d.copyInHelper || d.wsDir == "" {
		return false, nil
	}
	sImg, sDev := d.workspaceFiles(srcVol)
	dImg, dDev := d.workspaceFiles(dstVol)
	sLoop, dLoop := loopfs.LoopOf(sImg, sDev), loopfs.LoopOf(dImg, dDev)
	if sLoop == "" || dLoop == "" {
		return false, nil
	}
	sFi, err1 := os.Stat(sImg)
	dFi, err2 := os.Stat(dImg)
	if err1 != nil || err2 != nil || sFi.Size() != dFi.Size() {
		return false, nil
	}
	// The destination's device, exclusively: EBUSY when it is mounted.
	dst, err := os.OpenFile(dLoop, os.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		return false, nil
	}
	defer dst.Close()
	mp, err := loopfs.MountOf(sLoop)
	if err != nil {
		return false, err
	}
	if mp == "" {
		// Not mounted here: unmounted everywhere only if the device can
		// be opened exclusively (a mount in another namespace holds it).
		f, err := os.OpenFile(sLoop, os.O_RDONLY|unix.O_EXCL, 0)
		if err != nil {
			return false, nil
		}
		defer f.Close()
	} else {
		thaw, err := loopfs.Freeze(mp)
		if err != nil {
			return false, err
		}
		defer func() {
			if terr := thaw(); terr != nil && err == nil {
				err = terr
			}
		}()
	}
	if err := loopfs.CopySparse(ctx, sImg, dImg, sFi.Size()); err != nil {
		return true, err
	}
	// The device may hold blocks of the file system it had before (mkfs's,
	// read by a helper that mounted it): drop them.
	if err := loopfs.FlushOpen(dst); err != nil {
		return true, err
	}
	return true, nil
}

// thawAll thaws the file system of every bounded workspace mounted here: a
// hub that died during copyImage left its source frozen.
func thawAll(devs []string) {
	for _, dev := range devs {
		if mp, err := loopfs.MountOf(dev); err == nil && mp != "" {
			loopfs.Thaw(mp)
		}
	}
}
