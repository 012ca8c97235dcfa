package sandboxfake

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go runs on.
const clockTick = 100

// groupUsage sums, over the processes of group pgid (/proc/*/stat), their
// CPU time in nanoseconds, resident memory in bytes and threads.
func groupUsage(pgid int) (cpuNanos uint64, rss, threads int64) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	page := int64(os.Getpagesize())
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // it exited
		}
		// After "pid (comm) ": state ppid pgrp … utime(14) stime(15) …
		// num_threads(20) … rss(24), counted from 1 with pid.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 22 {
			continue
		}
		field := func(n int) int64 { v, _ := strconv.ParseInt(f[n-3], 10, 64); return v }
		if field(5) != int64(pgid) {
			continue
		}
		cpuNanos += uint64(field(14)+field(15)) * (1e9 / clockTick)
		threads += field(20)
		rss += field(24) * page
	}
	return cpuNanos, rss, threads
}
