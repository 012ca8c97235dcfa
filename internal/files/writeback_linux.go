package files

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to begin writing the byte range to disk
// now, without waiting for it: the fsync at the end of a large write then
// finds most pages written and the disk works while the rest arrives. A
// hint only; the fsync in commit is what makes the content durable.
func startWriteback(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
