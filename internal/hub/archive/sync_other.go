//go:build !linux

package archive

import (
	"io/fs"
	"time"
)

// sync does nothing: the hub ships for Linux only (packaging/README.md),
// and elsewhere a file:// store relies on the system's write-back.
func (s *Store) sync() error { return nil }

func (s *Store) syncFile(key string) error { return nil }

// statOf off Linux: the permission bits os.FileMode carries, and a
// change time in the far future, so no basis is trusted (every file is
// read).
func statOf(fi fs.FileInfo) (mode uint32, ctime time.Time, ok bool) {
	m := fi.Mode()
	mode = uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode, time.Unix(1<<62, 0), true
}

// openNoFollow: os.Root already keeps the walk inside the tree; the
// file's type is checked after it is opened.
const openNoFollow = 0
