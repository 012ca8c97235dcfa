package snapshot

import (
	"io/fs"
	"syscall"
)

// stampOf returns the change time, inode and device of fi.
func stampOf(fi fs.FileInfo) stamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}
	}
	return stamp{ctime: st.Ctimespec.Nano(), ino: st.Ino, dev: uint64(st.Dev)}
}
