//go:build unix && !linux

package runner

// groupRuns cannot tell a zombie from a running process without /proc:
// the group counts as running while kill(-pgid, 0) finds a member.
func groupRuns(int) bool { return true }
