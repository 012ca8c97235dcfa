//go:build unix

package pyrun

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// sessionsSupported returns nil: sessions work on unix.
func sessionsSupported() error { return nil }

// sysProcAttr puts the interpreter in a process group of its own.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// interruptLeader sends SIGINT to the interpreter (not its group).
func interruptLeader(p *os.Process) { _ = syscall.Kill(p.Pid, syscall.SIGINT) }

// killGroup sends SIGKILL to the interpreter's whole process group.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

// killedBy says which signal ended the process, in words, if one did.
func killedBy(st *os.ProcessState) (string, bool) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if name := unix.SignalName(ws.Signal()); name != "" {
			return "was killed by signal " + strings.TrimPrefix(name, "SIG"), true
		}
		return fmt.Sprintf("was killed by signal %d", ws.Signal()), true
	}
	return "", false
}
