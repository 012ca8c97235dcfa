package archive

import (
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

// ctimeOf is a file's status change time.
func ctimeOf(st *syscall.Stat_t) time.Time { return time.Unix(st.Ctim.Unix()) }
