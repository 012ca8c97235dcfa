// Package ports finds the TCP servers listening on this host (in this
// network namespace) and the processes that own them, for agentctl port
// ls. On Linux it reads /proc/net/tcp and /proc/net/tcp6 and maps each
// socket's inode to the process holding it through /proc/*/fd; other
// systems answer ErrUnsupported.
package ports

import "errors"

// Socket is one listening TCP socket.
type Socket struct {
	Port    uint16
	Address string // the local address: "0.0.0.0", "127.0.0.1", "::", …
	Network string // "tcp" (IPv4) or "tcp6"
	PID     int    // the owning process; 0 when it cannot be seen
	Command string // its command line, arguments joined by spaces
}

// ErrUnsupported is Listening's error on a system it cannot read.
var ErrUnsupported = errors.New("listing ports is implemented on Linux only")
