package archive

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// sync flushes a file:// store's file system (one syncfs, not a sync
// per blob).
func (s *Store) sync() error {
	if s.syncDir == "" {
		return nil
	}
	f, err := os.Open(s.syncDir)
	if err != nil {
		return errs.Wrap(errs.KindOf(err), err, "sync archive store")
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return errs.Wrap(errs.Unavailable, err, "sync archive store")
	}
	return nil
}

// syncFile flushes one object of a file:// store and its directory.
func (s *Store) syncFile(key string) error {
	if s.syncDir == "" {
		return nil
	}
	p := filepath.Join(s.syncDir, filepath.FromSlash(key))
	for _, name := range []string{p, filepath.Dir(p)} {
		f, err := os.Open(name)
		if err != nil {
			return errs.Wrap(errs.KindOf(err), err, "sync archive store")
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return errs.Wrap(errs.Unavailable, err, "sync archive store")
		}
	}
	return nil
}

// statOf is a file's permission bits (with setuid, setgid and sticky)
// and its status change time.
func statOf(fi fs.FileInfo) (mode uint32, ctime time.Time, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, time.Time{}, false
	}
	return uint32(st.Mode) & 0o7777, time.Unix(st.Ctim.Unix()), true
}

// openNoFollow opens a file to archive: never through a symlink, never
// blocking on a fifo put in its place.
const openNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
