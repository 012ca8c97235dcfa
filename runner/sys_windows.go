package runner

import "errors"

// waitLeader is not available on Windows: the waiter reaps the leader
// first and terminates what is left of its job object after (the job, not
// a pid, names the group, so it cannot have been reused).
func waitLeader(pid int) error { return errors.ErrUnsupported }

// SetOOMScoreAdj does nothing on Windows: there is no OOM score to adjust.
func SetOOMScoreAdj(pid, adj int) error { return nil }

// openProcDir returns -1: there is no OOM score to adjust on Windows.
func openProcDir() int { return -1 }

// closeProcDir does nothing on Windows.
func closeProcDir(int) {}

// setOOMScoreAdj does nothing on Windows.
func (m *Manager) setOOMScoreAdj(pid, adj int) error { return nil }

// cloexecInherited does nothing on Windows: os/exec passes a child only the
// handles it names (PROC_THREAD_ATTRIBUTE_HANDLE_LIST), so nothing the
// daemon inherited leaks into commands.
func cloexecInherited() {}
