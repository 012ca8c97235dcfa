//go:build unix && !linux

package runner

import "errors"

// waitLeader is not available here: the waiter reaps the leader first and
// signals what is left of its group after.
func waitLeader(pid int) error { return errors.ErrUnsupported }

// SetOOMScoreAdj does nothing here: there is no OOM score to adjust.
func SetOOMScoreAdj(pid, adj int) error { return nil }

// openProcDir returns -1: there is no OOM score to adjust here.
func openProcDir() int { return -1 }

// closeProcDir does nothing here.
func closeProcDir(int) {}

// setOOMScoreAdj does nothing here.
func (m *Manager) setOOMScoreAdj(pid, adj int) error { return nil }

// cloexecInherited does nothing here.
func cloexecInherited() {}
