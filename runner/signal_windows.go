package runner

import (
	"strconv"
	"strings"
	"syscall"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// ParseSignal parses a signal given by name, with or without the SIG
// prefix and in any case ("TERM", "sigkill"), or by number ("9"). Windows
// has no signals: only TERM (Ctrl-Break to the process group, then KILL
// after the grace period), INT (Ctrl-Break) and KILL (every process of the
// job object is terminated) are accepted.
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	var sig syscall.Signal
	if n, err := strconv.Atoi(name); err == nil {
		if n <= 0 || n > 64 || SignalName(syscall.Signal(n)) == "" {
			return 0, errs.New(errs.Invalid, "signal %d is not a valid signal number", n)
		}
		sig = syscall.Signal(n)
	} else {
		name = strings.TrimPrefix(name, "SIG")
		for n := syscall.Signal(1); n <= syscall.SIGTERM; n++ {
			if SignalName(n) == name {
				sig = n
			}
		}
		if sig == 0 {
			return 0, errs.New(errs.Invalid, "unknown signal %q: use TERM, INT or KILL", s)
		}
	}
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGKILL:
		return sig, nil
	}
	return 0, errs.New(errs.Invalid, "signal %s has no equivalent on windows: use TERM, INT or KILL", SignalName(sig))
}

// SignalName returns the name of sig without the SIG prefix ("KILL"), or
// "" for an unknown signal. It names the signals package syscall defines
// on Windows, though only TERM, INT and KILL can be sent.
func SignalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGILL:
		return "ILL"
	case syscall.SIGTRAP:
		return "TRAP"
	case syscall.SIGABRT:
		return "ABRT"
	case syscall.SIGBUS:
		return "BUS"
	case syscall.SIGFPE:
		return "FPE"
	case syscall.SIGKILL:
		return "KILL"
	case syscall.SIGSEGV:
		return "SEGV"
	case syscall.SIGPIPE:
		return "PIPE"
	case syscall.SIGALRM:
		return "ALRM"
	case syscall.SIGTERM:
		return "TERM"
	}
	return ""
}
