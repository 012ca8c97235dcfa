package archive

import (
	"os"

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
