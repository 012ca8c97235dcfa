//go:build unix

package runner

import (
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ptySupported returns nil: unix has ptys.
func ptySupported() error { return nil }

// openPty allocates a pty of the given size. The master is returned in
// non-blocking mode, managed by the runtime poller: pty.Open leaves it
// blocking (it calls Fd), and a blocking file can neither take read
// deadlines nor be interrupted by Close, which the runner needs to stop
// reading when the session is gone.
func openPty(size *PtySize) (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	if err := pty.Setsize(tty, winsize(size)); err != nil {
		tty.Close()
		return nil, nil, err
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		tty.Close()
		return nil, nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		tty.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty, nil
}

func winsize(size *PtySize) *pty.Winsize {
	ws := &pty.Winsize{Rows: 24, Cols: 80}
	if size != nil && size.Rows > 0 {
		ws.Rows = size.Rows
	}
	if size != nil && size.Cols > 0 {
		ws.Cols = size.Cols
	}
	return ws
}

// setPtySize changes the window size of the pty whose master is f; the
// kernel sends SIGWINCH to the terminal's foreground process group.
func setPtySize(f *os.File, size PtySize) error {
	ws := winsize(&size)
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	err = conn.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
	})
	if err != nil {
		return os.ErrClosed // Control fails only on a closed file
	}
	return ioctlErr
}
