//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package pyrun

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// fionread is FIONREAD, _IOR('f', 127, int), on the BSDs and macOS.
const fionread = 0x4004667f

// waitLeader is not available here: the waiter reaps the interpreter first
// and signals what is left of its group after.
func waitLeader(pid int) error { return errors.ErrUnsupported }

// fdBuffered returns how many bytes wait to be read from the pipe fd.
func fdBuffered(fd int) (int, error) { return unix.IoctlGetInt(fd, fionread) }

// growPipe does nothing here.
func growPipe(f *os.File, size int) {}
