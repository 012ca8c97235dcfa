//go:build unix

package files

import (
	"io/fs"
	"os"
	"syscall"
)

// ownerOf returns the numeric owner and group of fi.
func ownerOf(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}

// keepOwner gives f the owner and group of the file fi describes, where the
// OS lets us (root can; others can at most change the group to one of
// theirs). Failure is not an error: the content matters, the owner is kept
// where possible.
func keepOwner(f *os.File, fi fs.FileInfo) {
	uid, gid, ok := ownerOf(fi)
	if !ok {
		return
	}
	if int(uid) == os.Getuid() && int(gid) == os.Getegid() {
		return
	}
	if f.Chown(int(uid), int(gid)) != nil {
		_ = f.Chown(-1, int(gid))
	}
}

// writable reports whether the current user may write the file at path,
// as open(O_WRONLY) would decide.
func writable(path string) bool {
	return syscall.Access(path, 2 /* W_OK */) == nil
}

// sameFile reports whether a and b describe the same, unchanged file:
// same inode, size and modification time.
func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
