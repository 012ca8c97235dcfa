//go:build !linux

package sandboxfake

// groupUsage has no /proc to read: nothing measured.
func groupUsage(int) (cpuNanos uint64, rss, threads int64) { return 0, 0, 0 }
