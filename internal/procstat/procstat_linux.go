package procstat

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go runs on.
const clockTick = 100

// Each calls fn with every process's sample; a process that exits while
// it reads is left out.
func Each(fn func(Sample)) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	page := int64(os.Getpagesize())
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // it exited
		}
		// "pid (comm) state(3) ppid(4) pgrp(5) … utime(14) stime(15) …
		// num_threads(20) … rss(24)", counted from 1 with pid; comm may
		// hold spaces and parentheses, so fields count from the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 22 {
			continue
		}
		field := func(n int) int64 { v, _ := strconv.ParseInt(f[n-3], 10, 64); return v }
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		fn(Sample{PID: pid, PGRP: int(field(5)), CPUNanos: uint64(field(14)+field(15)) * (1e9 / clockTick),
			RSSBytes: field(24) * page, Threads: field(20)})
	}
}
