//go:build unix

package sandboxtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path (made if missing), waiting for
// another process that holds it, and returns the function that releases it.
// The lock goes with the process if it dies.
func lockFile(path string) (unlock func(), err error) {
	// Read-only, and created only when missing: flock needs no write access,
	// and a lock file another user made in a sticky /tmp stays usable.
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
