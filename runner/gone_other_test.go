//go:build unix && !linux

package runner

import (
	"errors"
	"syscall"
)

// processGone reports whether pid no longer exists (a zombie counts as
// alive here).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
