package runner

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/windows"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// killedExitCode is the exit code of the processes of a job the runner
// terminates (KILL, or the end of a TERM's grace period). Windows has no
// signals: an ExitInfo never names one there, and the code is what
// TerminateProcess users conventionally pass (os.Process.Kill does too).
const killedExitCode = 1

// procGroup is the platform's state for a process's group: on Windows a
// job object holding the leader and everything it starts, created with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE so that nothing outlives a daemon that
// dies. The leader is also started with CREATE_NEW_PROCESS_GROUP, so that
// Ctrl-Break can be sent to it and its console children.
//
// This code is cross-compiled and vetted, but the tests of this package do
// not run on Windows (they are unix-only): it is untested on a real
// Windows machine.
type procGroup struct {
	job windows.Handle // 0 before startGroup and after releaseGroup
}

// DefaultShell returns the shell that runs command strings when none is
// configured: %ComSpec% (cmd.exe), else cmd.exe in the system directory.
// $SHELL is ignored on Windows: where it is set (Git Bash, MSYS) it holds
// a POSIX path that Windows cannot run.
func DefaultShell() string {
	return cmp.Or(os.Getenv("ComSpec"), filepath.Join(cmp.Or(os.Getenv("SystemRoot"), `C:\Windows`), "System32", "cmd.exe"))
}

// shellCommand returns the argv that runs command with shell, and the raw
// command line to pass instead of one built from argv. cmd.exe does not
// parse its command line like other programs, so command is handed to it
// verbatim as `cmd.exe /d /s /c "command"` (/d: no AutoRun commands, /s:
// strip only the outer quotes). PowerShell gets -Command; any other shell
// (bash, sh from Git for Windows) gets -c as on unix.
func shellCommand(shell, command string) (argv []string, cmdLine string) {
	switch strings.TrimSuffix(strings.ToLower(filepath.Base(shell)), ".exe") {
	case "cmd":
		return []string{shell, "/d", "/s", "/c", command}, syscall.EscapeArg(shell) + ` /d /s /c "` + command + `"`
	case "powershell", "pwsh":
		return []string{shell, "-NoProfile", "-NonInteractive", "-Command", command}, ""
	}
	return []string{shell, "-c", command}, ""
}

// sysProcAttr starts the child suspended in a new process group; startGroup
// puts it into its job object before it runs. A pty is refused earlier
// (see ptySupported).
func sysProcAttr(pl *plan, _ bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED,
		CmdLine:       pl.cmdLine,
	}
}

// startGroup creates the job object of the just started (suspended)
// process, assigns the process to it and resumes it. Because the process
// is in the job before its first instruction runs, everything it starts
// is in the job too.
func (p *Process) startGroup() error {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return fmt.Errorf("create job object: %w", err)
	}
	if err := setKillOnClose(job, true); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("set up job object: %w", err)
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(p.pid))
	if err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("open process: %w", err)
	}
	err = windows.AssignProcessToJobObject(job, h)
	windows.CloseHandle(h)
	if err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("assign process to job object: %w", err)
	}
	if err := resumeThreads(uint32(p.pid)); err != nil {
		_ = windows.TerminateJobObject(job, killedExitCode)
		windows.CloseHandle(job)
		return fmt.Errorf("resume process: %w", err)
	}
	p.grp.job = job
	return nil
}

// setKillOnClose sets or clears JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE.
func setKillOnClose(job windows.Handle, on bool) error {
	info := new(windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION) // on the heap: it does not move
	if on {
		info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	}
	_, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(info)), uint32(unsafe.Sizeof(*info)))
	runtime.KeepAlive(info)
	return err
}

// resumeThreads resumes the threads of the suspended process pid (one,
// for a process just created suspended). os/exec does not return the
// thread handle CreateProcess gives, so the thread is found by a snapshot.
func resumeThreads(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(snap)
	var te windows.ThreadEntry32
	te.Size = uint32(unsafe.Sizeof(te))
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return err
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return err
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return err
	}
	if resumed == 0 {
		return errors.New("no thread of the process found")
	}
	return nil
}

// releaseGroup closes the job object once the process has finished. When
// the process was not being stopped, whatever it left running in the
// background lives on, as on unix: KILL_ON_JOB_CLOSE is cleared first.
// When it was, closing the job kills anything still in it.
func (p *Process) releaseGroup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.grp.job == 0 {
		return
	}
	if !p.stopping {
		_ = setKillOnClose(p.grp.job, false)
	}
	windows.CloseHandle(p.grp.job)
	p.grp.job = 0
}

// groupAliveLocked reports whether the process's job can still be
// signalled after its leader exited: never on Windows, where the job is
// released when the process finishes (what it left running in the
// background lives on, as the job was not being stopped).
func (p *Process) groupAliveLocked() bool { return p.exit == nil }

// signalLocked delivers sig to the process's job or process group, as far
// as Windows allows: KILL terminates every process of the job; TERM and
// INT send Ctrl-Break to the process group, which reaches only console
// programs that share the daemon's console (a daemon running as a service
// has none). TERM does not fail when Ctrl-Break cannot be sent: the KILL
// after the grace period ends the process. Other signals have no
// equivalent and are refused. Callers make sure the process has not
// finished.
func (p *Process) signalLocked(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGKILL:
		err := windows.TerminateJobObject(p.grp.job, killedExitCode)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, windows.ERROR_ACCESS_DENIED):
			return errs.New(errs.Permission, "kill process %s: permission denied", p.id)
		}
		return errs.Wrap(errs.Unknown, err, "kill process %s", p.id)
	case syscall.SIGTERM, syscall.SIGINT:
		err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(p.pid))
		switch {
		case err == nil:
			return nil
		case sig == syscall.SIGTERM:
			if p.log != nil {
				p.log.Debug("no Ctrl-Break sent; the process is killed after the grace period", zap.Error(err))
			}
			return nil
		}
		return errs.Wrap(errs.Precondition, err, "send Ctrl-Break (INT) to process %s: it does not share a console with the daemon; use TERM or KILL", p.id)
	}
	return errs.New(errs.Invalid, "signal %s has no equivalent on windows: use TERM, INT or KILL", SignalName(sig))
}

// continueLocked does nothing on Windows: processes cannot be stopped by a
// signal there.
func (p *Process) continueLocked() {}
