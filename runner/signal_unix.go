//go:build unix

package runner

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// ParseSignal parses a signal given by name, with or without the SIG
// prefix and in any case ("TERM", "sigkill"), or by number ("9").
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(name); err == nil {
		if n <= 0 || n > 64 || SignalName(syscall.Signal(n)) == "" {
			return 0, errs.New(errs.Invalid, "signal %d is not a valid signal number", n)
		}
		return syscall.Signal(n), nil
	}
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, errs.New(errs.Invalid, "unknown signal %q: use a name like TERM, KILL, INT, HUP or a number", s)
}

// SignalName returns the name of sig without the SIG prefix ("KILL"), or
// "" for an unknown signal. Real-time signals are named by number ("RT34"
// is not portable, so "34").
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	if sig >= 32 && sig <= 64 {
		return strconv.Itoa(int(sig))
	}
	return ""
}
