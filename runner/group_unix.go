//go:build unix

package runner

import (
	"cmp"
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// procGroup is the platform's state for a process's group. On unix there
// is none: the group id is the leader's pid.
//
//lint:ignore U1000 used by the Windows implementation
type procGroup struct{}

// DefaultShell returns the shell that runs command strings when none is
// configured: $SHELL, else /bin/sh.
func DefaultShell() string { return cmp.Or(os.Getenv("SHELL"), "/bin/sh") }

// shellCommand returns the argv that runs command with shell, and the raw
// command line to pass instead of one built from argv (never on unix).
func shellCommand(shell, command string) (argv []string, cmdLine string) {
	return []string{shell, "-c", command}, ""
}

// sysProcAttr puts the child in a process group of its own, or with a pty
// in a session of its own with the pty as its controlling terminal.
func sysProcAttr(_ *plan, withPty bool) *syscall.SysProcAttr {
	if withPty {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// startGroup finishes setting up the group of the just started process:
// nothing to do on unix, where Setpgid or Setsid made it.
func (p *Process) startGroup() error { return nil }

// releaseGroup frees the group's platform state once the process has
// finished: nothing to do on unix.
func (p *Process) releaseGroup() {}

// groupAliveLocked reports whether a process that still runs is left in
// the process group. Zombies do not count: they run nothing, and a zombie
// whose new parent reaps late (or never) would make a finished process
// look alive. While any member exists, zombie or not, the group id cannot
// be reused: the kernel keeps an id allocated while a process group of
// that id exists, even after its leader was reaped.
func (p *Process) groupAliveLocked() bool {
	err := unix.Kill(-p.pid, 0)
	if err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	return groupRuns(p.pid)
}

// signalLocked signals the process group. Callers make sure the process
// has not finished, or that its group still has members: until then the
// group id cannot have been reused.
func (p *Process) signalLocked(sig syscall.Signal) error {
	err := unix.Kill(-p.pid, sig)
	switch {
	case err == nil, errors.Is(err, unix.ESRCH):
		return nil
	case errors.Is(err, unix.EPERM):
		return errs.New(errs.Permission, "signal %s to process %s: permission denied", SignalName(sig), p.id)
	}
	return errs.Wrap(errs.Unknown, err, "signal %s to process %s", SignalName(sig), p.id)
}

// continueLocked sends SIGCONT to the group, so that a stopped group can
// act on the SIGTERM sent before.
func (p *Process) continueLocked() { _ = p.signalLocked(syscall.SIGCONT) }
