package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Ioctls that golang.org/x/sys/unix does not name (linux/fs.h).
const (
	fiFreeze  = 0xc0045877 // FIFREEZE, _IOWR('X', 119, int)
	fiThaw    = 0xc0045878 // FITHAW, _IOWR('X', 120, int)
	blkFlsBuf = 0x1261     // BLKFLSBUF, _IO(0x12, 97)
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
	sLoop, dLoop := loopOf(sImg, sDev), loopOf(dImg, dDev)
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
	mp, err := mountOf(sLoop)
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
		thaw, err := freeze(mp)
		if err != nil {
			return false, err
		}
		defer func() {
			if terr := thaw(); terr != nil && err == nil {
				err = terr
			}
		}()
	}
	if err := copySparse(ctx, sImg, dImg, sFi.Size()); err != nil {
		return true, err
	}
	// The device may hold blocks of the file system it had before (mkfs's,
	// read by a helper that mounted it): drop them.
	if err := unix.IoctlSetInt(int(dst.Fd()), blkFlsBuf, 0); err != nil {
		return true, fmt.Errorf("flush %s: %w", dLoop, err)
	}
	return true, nil
}

// freeze freezes the file system mounted at mp (FIFREEZE) and returns
// what thaws it.
func freeze(mp string) (func() error, error) {
	f, err := os.Open(mp)
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlSetInt(int(f.Fd()), fiFreeze, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("freeze %s: %w", mp, err)
	}
	return func() error {
		defer f.Close()
		if err := unix.IoctlSetInt(int(f.Fd()), fiThaw, 0); err != nil {
			return fmt.Errorf("thaw %s: %w", mp, err)
		}
		return nil
	}, nil
}

// thawAll thaws the file system of every bounded workspace mounted here: a
// hub that died during copyImage left its source frozen. Thawing one that
// is not frozen does nothing.
func thawAll(devs []string) {
	for _, dev := range devs {
		if mp, err := mountOf(dev); err == nil && mp != "" {
			if f, err := os.Open(mp); err == nil {
				_ = unix.IoctlSetInt(int(f.Fd()), fiThaw, 0) // EINVAL: not frozen
				f.Close()
			}
		}
	}
}

// mountOf is where block device dev is mounted in this mount namespace,
// "" if nowhere.
func mountOf(dev string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return "", err
	}
	want := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT …
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[2] == want && fields[3] == "/" {
			return unescapeMount(fields[4]), nil
		}
	}
	return "", sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// copySparse makes dst (an existing file) a copy of the first size bytes
// of src: emptied to holes, then every data extent of src copied at its
// offset (copy_file_range: within the kernel), holes left holes.
func copySparse(ctx context.Context, src, dst string, size int64) error {
	s, err := os.Open(src)
	if err != nil {
		return err
	}
	defer s.Close()
	t, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.Truncate(0); err != nil {
		return err
	}
	if err := t.Truncate(size); err != nil {
		return err
	}
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := unix.Seek(int(s.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // holes to the end
		}
		if err != nil {
			return fmt.Errorf("seek data in %s: %w", src, err)
		}
		hole, err := unix.Seek(int(s.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole in %s: %w", src, err)
		}
		hole = min(hole, size)
		for data < hole {
			in, out := data, data
			n, err := unix.CopyFileRange(int(s.Fd()), &in, int(t.Fd()), &out, int(min(hole-data, 1<<30)), 0)
			if err != nil {
				return fmt.Errorf("copy %s: %w", src, err)
			}
			if n == 0 {
				return fmt.Errorf("copy %s: %w", src, io.ErrUnexpectedEOF)
			}
			data += int64(n)
		}
		off = hole
	}
	return nil
}
