//go:build unix

package files

import (
	"io"
	"os"
	"syscall"
)

// holdOld opens the file a rename is about to replace, so that the rename
// only drops its name: freeing a large file's blocks (slow on ext4) then
// happens when the returned file is closed, after the write has answered. Nil if it cannot be opened; O_NONBLOCK so that a FIFO
// swapped in meanwhile cannot block the open.
func holdOld(path string) io.Closer {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	return f
}
