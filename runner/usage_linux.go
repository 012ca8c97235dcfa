package runner

import "github.com/devdepot-ai/agentd/internal/procstat"

// groupsUsage sums, over the processes whose group is in groups
// (/proc/*/stat), CPU time, resident memory and the processes.
func groupsUsage(groups map[int]bool) Usage {
	u := Usage{Counted: true}
	if len(groups) == 0 {
		return u
	}
	procstat.Each(func(s procstat.Sample) {
		if groups[s.PGRP] {
			u.CPUNanos += s.CPUNanos
			u.MemoryBytes += s.RSSBytes
			u.Processes++
		}
	})
	return u
}
