// Package procstat reads what Linux's /proc/PID/stat says of each
// process: its group, CPU time, resident memory and threads. agentd's
// runner sums it over the process groups it started (agentctl top of a
// machine) and the fake sandbox driver over a sandbox's group; one
// parser serves both. Other systems have no /proc: Each calls nothing
// there.
package procstat

// Sample is one process's counters.
type Sample struct {
	PID, PGRP int
	// CPUNanos is its user + system CPU time.
	CPUNanos uint64
	// RSSBytes is its resident memory.
	RSSBytes int64
	// Threads is how many threads it has.
	Threads int64
}
