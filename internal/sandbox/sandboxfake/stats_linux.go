package sandboxfake

import "github.com/devdepot-ai/agentd/internal/procstat"

// groupUsage sums, over the processes of group pgid (/proc/*/stat), their
// CPU time in nanoseconds, resident memory in bytes and threads.
func groupUsage(pgid int) (cpuNanos uint64, rss, threads int64) {
	procstat.Each(func(s procstat.Sample) {
		if s.PGRP == pgid {
			cpuNanos += s.CPUNanos
			rss += s.RSSBytes
			threads += s.Threads
		}
	})
	return cpuNanos, rss, threads
}
