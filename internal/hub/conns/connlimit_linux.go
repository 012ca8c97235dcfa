package conns

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// TotalCap is how many connections the hub takes at once given its file
// descriptor limit (RLIMIT_NOFILE): the limit less a reserve for the
// database, the Docker engine, tunnels' streams and the accept that
// refuses the excess; 0 (no cap) when the limit is infinite or unknown.
func TotalCap() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 0
	}
	cur := int(min(rl.Cur, 1<<30))
	reserve := min(max(cur/8, 64), 1024)
	if reserve >= cur/2 {
		return cur / 2
	}
	return cur - reserve
}

// UnixPeerKey is the KeyFunc of the sandboxes' unix socket: the cgroup of
// the process at the other end of a unix connection (its container's, for
// a sandbox), and whether it is capped.
func UnixPeerKey(c net.Conn) (string, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return unknownPeer, true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return unknownPeer, true
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return unknownPeer, true
	}
	if cred.Pid == 0 {
		return unseenPeer, false
	}
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(int(cred.Pid)) + "/cgroup")
	if err != nil || len(cg) == 0 {
		return unknownPeer, true
	}
	return "cgroup:" + strings.TrimSpace(string(cg)), true
}
