//go:build unix

package listen

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// isRefused reports whether dialing a socket file failed because nothing
// listens on it (a stale socket).
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// listenPrivate creates the unix socket at path with mode 0600.
func listenPrivate(path string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// isSocketFile reports whether fi describes a unix socket.
func isSocketFile(fi os.FileInfo) bool { return fi.Mode().Type() == os.ModeSocket }
