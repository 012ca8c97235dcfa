//go:build unix

package snapshot

import (
	"os"
	"syscall"
)

// openSource opens a file of the tree for reading without following a
// symlink that replaced it, and without blocking on a named pipe that
// replaced it since it was listed.
func openSource(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}
