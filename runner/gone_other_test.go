//go:build unix && !linux

package runner

import (
	"errors"
	"syscall"
	"time"
)

// processGone reports whether pid no longer exists (a zombie counts as
// alive here).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// processGoneWithin reports whether pid is gone within d (checked every
// 10 ms: there is no pidfd to wait on here).
func processGoneWithin(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if processGone(pid) {
			return true
		}
	}
	return processGone(pid)
}
