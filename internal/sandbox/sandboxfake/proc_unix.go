//go:build unix

package sandboxfake

import (
	"os"
	"syscall"
)

// groupAttr makes the process the leader of a group of its own.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// terminate sends the process SIGTERM (an engine's init forwards the stop
// signal to its child).
func terminate(p *os.Process) { _ = p.Signal(syscall.SIGTERM) }

// killGroup sends SIGKILL to the process's group (its id: groupAttr).
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

// exitCode is the exit status, or 128 plus the signal that killed the
// process, as a shell and a container engine report it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// stopGroup stops the process's group (SIGSTOP): a paused container.
func stopGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGSTOP) }

// continueGroup continues the process's group (SIGCONT).
func continueGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGCONT) }
