package listen

import (
	"errors"
	"net"
	"os"

	"golang.org/x/sys/windows"
)

// isRefused reports whether dialing a socket file failed because nothing
// listens on it (a stale socket).
func isRefused(err error) bool { return errors.Is(err, windows.WSAECONNREFUSED) }

// listenPrivate creates the unix socket at path (AF_UNIX, Windows 10 1803
// and later). Windows has no umask and ignores file modes: who may connect
// is decided by the ACL the socket file inherits from its directory, so the
// socket belongs in a directory only its user can open (the default state
// directory under %LOCALAPPDATA% is one). Untested on a real Windows
// machine: this package's tests do not run there.
func listenPrivate(path string) (net.Listener, error) {
	return net.Listen("unix", path)
}

// isSocketFile reports whether fi describes a unix socket: an AF_UNIX
// reparse point, which Go reports as a socket or as an irregular file.
func isSocketFile(fi os.FileInfo) bool {
	return fi.Mode().Type()&(os.ModeSocket|os.ModeIrregular) != 0
}
