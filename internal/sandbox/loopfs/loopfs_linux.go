package loopfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Ioctls that golang.org/x/sys/unix does not name (linux/fs.h).
const (
	fiFreeze  = 0xc0045877 // FIFREEZE, _IOWR('X', 119, int)
	fiThaw    = 0xc0045878 // FITHAW, _IOWR('X', 120, int)
	blkFlsBuf = 0x1261     // BLKFLSBUF, _IO(0x12, 97)
)

// Make creates img, a sparse file of size bytes (it must not exist), holding
// an ext4 file system: no blocks reserved for root (the sandbox user gets
// all of it), its root directory uid:gid's, and no lost+found (a non-empty
// volume gets no copy-up of the image's /workspace). A journal of 16 MiB
// at most: mkfs's default for 10 GiB, 64 MiB, is host disk every empty
// workspace would take. It removes img when it fails.
func Make(ctx context.Context, img string, size int64, uid, gid int) (err error) {
	if size < MinBytes {
		return fmt.Errorf("workspace size %d: want at least %d MiB", size, MinBytes>>20)
	}
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(img)
		}
	}()
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
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

// Attach gives img a free loop device (through the loop control device
// loopControl, LoopControl but in tests) and points the symlink dev at
// it; it returns the device's path. The symlink is the caller's name for
// the device: a device number that changes (the host rebooted, the loop
// devices went) is repointed by attaching again, and nothing ever uses
// whatever another image holds /dev/loopN by then.
func Attach(loopControl, img, dev string) (string, error) {
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
			_ = Detach(path)
			return "", fmt.Errorf("link %s: %w", dev, err)
		}
		return path, nil
	}
	return "", fmt.Errorf("%w: every free one was taken meanwhile", ErrNoLoopDevice)
}

// Detach frees a loop device (once nothing mounts it; a mounted one is
// freed when it is unmounted).
func Detach(path string) error {
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

// Backing is the file a loop device is attached to ("" if none).
func Backing(path string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(path), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
}

// LoopOf is the loop device that the symlink dev points at and that holds
// img, or "".
func LoopOf(img, dev string) string {
	path, err := os.Readlink(dev)
	if err != nil || !strings.HasPrefix(path, "/dev/loop") {
		return ""
	}
	if Backing(path) != img {
		return ""
	}
	return path
}

// Freeze freezes the file system mounted at mp (FIFREEZE: ext4 writes out
// every dirty block and its journal, and writers block until the thaw) and
// returns what thaws it.
func Freeze(mp string) (func() error, error) {
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

// Thaw thaws the file system mounted at mp, if it is frozen (a hub that
// died during a copy left it so); thawing one that is not frozen does
// nothing.
func Thaw(mp string) {
	if f, err := os.Open(mp); err == nil {
		_ = unix.IoctlSetInt(int(f.Fd()), fiThaw, 0) // EINVAL: not frozen
		f.Close()
	}
}

// MountOf is where block device dev is mounted (its root) in this mount
// namespace, "" if nowhere.
func MountOf(dev string) (string, error) {
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

// CopySparse makes dst (an existing file) a copy of the first size bytes
// of src: emptied to holes, then every data extent of src copied at its
// offset (copy_file_range: within the kernel), holes left holes.
func CopySparse(ctx context.Context, src, dst string, size int64) error {
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

// FlushBuffers drops the buffer cache of block device dev (BLKFLSBUF): after
// its image was rewritten underneath, it may hold blocks of the file system
// it had before.
func FlushBuffers(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return FlushOpen(f)
}

// FlushOpen is FlushBuffers on a device the caller holds open.
func FlushOpen(f *os.File) error {
	if err := unix.IoctlSetInt(int(f.Fd()), blkFlsBuf, 0); err != nil {
		return fmt.Errorf("flush %s: %w", f.Name(), err)
	}
	return nil
}

// Mount mounts the ext4 file system on block device dev at dir, nodev and
// nosuid.
func Mount(dev, dir string) error {
	if err := unix.Mount(dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mount %s at %s: %w", dev, dir, err)
	}
	return nil
}

// Unmount unmounts dir; when something still holds it (EBUSY), it is
// detached lazily and goes when its last user does.
func Unmount(dir string) error {
	err := unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// CopyImage makes the image dst, attached to the loop device dstDev, a
// sparse copy of the image src (both size bytes): dstDev is held open
// exclusively for the copy (it fails while dst is mounted), and its buffer
// cache dropped after it. A mounted src must be frozen (Freeze) by the
// caller, so that its image is a clean file system.
func CopyImage(ctx context.Context, src, dst, dstDev string, size int64) error {
	d, err := os.OpenFile(dstDev, os.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("open %s exclusively (is it mounted?): %w", dstDev, err)
	}
	defer d.Close()
	if err := CopySparse(ctx, src, dst, size); err != nil {
		return err
	}
	return FlushOpen(d)
}
