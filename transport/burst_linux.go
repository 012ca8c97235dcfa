package transport

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const canPeekQueued = true

// queued is how many bytes the socket has waiting to be read (0 if it
// cannot tell).
func queued(raw syscall.RawConn) int {
	n := 0
	_ = raw.Control(func(fd uintptr) {
		v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		if err == nil {
			n = v
		}
	})
	return n
}
