package pyrun

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/windows"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// sessionsSupported refuses Python sessions on Windows: the driver talks to
// the daemon over inherited descriptors 3 and 4 (os/exec's ExtraFiles,
// which Windows does not have) and relies on fcntl. Python code still runs
// on Windows as a plain process (ProcessService.Start with python -c).
func sessionsSupported() error {
	return errs.New(errs.Precondition, "python sessions are not supported on windows yet: run python as a process instead (e.g. argv [python, -c, CODE])")
}

// sysProcAttr starts the interpreter in a new process group. Never used
// while sessionsSupported refuses sessions.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
}

// interruptLeader sends Ctrl-Break to the interpreter's process group (the
// nearest Windows has to SIGINT; it reaches the interpreter only when it
// shares the daemon's console).
func interruptLeader(p *os.Process) {
	_ = windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(p.Pid))
}

// killGroup terminates the interpreter (Windows has no process groups to
// kill at once; sessions are refused there anyway).
func killGroup(p *os.Process) { _ = p.Kill() }

// killedBy reports nothing on Windows: processes end with exit codes only.
func killedBy(*os.ProcessState) (string, bool) { return "", false }

// waitLeader is not available on Windows: the waiter reaps the interpreter
// first.
func waitLeader(pid int) error { return errors.ErrUnsupported }

// fdBuffered is not available on Windows.
func fdBuffered(fd int) (int, error) { return 0, errors.ErrUnsupported }

// growPipe does nothing on Windows.
func growPipe(f *os.File, size int) {}
