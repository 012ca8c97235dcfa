package runner

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetOOMScoreAdj sets the OOM killer's score adjustment of process pid
// (-1000 to 1000; higher dies first). Raising it needs no privilege, so a
// sandbox's agentd makes the commands it starts die before it does.
func SetOOMScoreAdj(pid, adj int) error {
	return writeOOMScoreAdj(unix.AT_FDCWD, pid, adj)
}

// writeOOMScoreAdj writes adj to PID/oom_score_adj under procDir, a
// descriptor of /proc (or AT_FDCWD: then the path from "/"), with plain
// system calls (open, write, close), not through an *os.File, which would
// also try to register the file with the runtime's poller: this runs on
// every start.
func writeOOMScoreAdj(procDir, pid, adj int) error {
	name := strconv.Itoa(pid) + "/oom_score_adj"
	if procDir == unix.AT_FDCWD {
		name = "/proc/" + name
	}
	fd, err := unix.Openat(procDir, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		_, err = unix.Write(fd, []byte(strconv.Itoa(adj)))
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: "/proc/" + strconv.Itoa(pid) + "/oom_score_adj", Err: err}
	}
	return nil
}

// openProcDir opens /proc for setOOMScoreAdj, or returns -1.
func openProcDir() int {
	fd, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// closeProcDir closes what openProcDir opened.
func closeProcDir(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// setOOMScoreAdj is SetOOMScoreAdj with the path opened relative to the
// Manager's /proc: no walk from "/".
func (m *Manager) setOOMScoreAdj(pid, adj int) error {
	if m.procDir < 0 {
		return SetOOMScoreAdj(pid, adj)
	}
	return writeOOMScoreAdj(m.procDir, pid, adj)
}

// waitLeader blocks until the process pid has exited, without reaping it.
// While the leader is an unreaped zombie its pid, which is also the id of
// its process group, cannot be reused, so the group can still be signalled
// safely.
func waitLeader(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// cloexecInherited marks every file descriptor above stderr close-on-exec.
// Go opens its own files close-on-exec, but descriptors the daemon
// inherited from whatever started it are not, and would leak into every
// command.
func cloexecInherited() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
