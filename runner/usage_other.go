//go:build !linux

package runner

// groupsUsage has no per-process counters to read here.
func groupsUsage(map[int]bool) Usage { return Usage{} }
