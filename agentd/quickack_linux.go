package agentd

import (
	"net"

	"golang.org/x/sys/unix"
)

// quickAck asks the kernel to acknowledge what c receives at once. Linux
// delays an ACK (40 ms at least) on a connection in request/response mode,
// and a server that writes a response in two sends with Nagle's algorithm
// on (python3 -m http.server: headers, then body) holds the second until
// that ACK: every request through a kept-alive connection would wait it
// out. The kernel clears the flag again as it sees fit, so the daemon sets
// it after each read. A failure only costs the delay: it is ignored.
func quickAck(c *net.TCPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
}
