package pyrun

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitLeader blocks until the process pid has exited, without reaping it:
// while it is an unreaped zombie its pid, the id of its process group,
// cannot be reused, so the group can still be signalled safely.
func waitLeader(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// fdBuffered returns how many bytes wait to be read from the pipe fd.
func fdBuffered(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCINQ) }

// growPipe asks for a pipe buffer of size bytes (best effort): fewer
// round trips between the daemon and the interpreter for large requests and
// floods of output.
func growPipe(f *os.File, size int) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size)
	})
}
