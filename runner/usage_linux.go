package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go runs on.
const clockTick = 100

// groupsUsage sums, over the processes whose group is in groups
// (/proc/*/stat), CPU time, resident memory and the processes.
func groupsUsage(groups map[int]bool) Usage {
	u := Usage{Counted: true}
	if len(groups) == 0 {
		return u
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	page := int64(os.Getpagesize())
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // it exited
		}
		// After "pid (comm) ": state(3) ppid(4) pgrp(5) … utime(14)
		// stime(15) … rss(24), counted from 1 with pid.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 22 {
			continue
		}
		field := func(n int) int64 { v, _ := strconv.ParseInt(f[n-3], 10, 64); return v }
		if !groups[int(field(5))] {
			continue
		}
		u.CPUNanos += uint64(field(14)+field(15)) * (1e9 / clockTick)
		u.MemoryBytes += field(24) * page
		u.Processes++
	}
	return u
}
