package runner

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// cgroupFiles are where the kernel counts, for the cgroup agentd (and so
// every command it starts) runs in, the processes the OOM killer ended and
// the forks the pids limit refused, and where it keeps those limits. A
// path is "" when it cannot be read here.
type cgroupFiles struct {
	memEvents, oomKey string // memory.events "oom_kill" (v2), memory.oom_control "oom_kill" (v1)
	pidsEvents        string // pids.events "max" (both)
	memMax, pidsMax   string // memory.max or memory.limit_in_bytes; pids.max
}

// theCgroupFiles finds them once: agentd does not move between cgroups.
var theCgroupFiles = sync.OnceValue(func() cgroupFiles {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupFiles{}
	}
	var f cgroupFiles
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		switch {
		case parts[0] == "0" && ctrls == "":
			// cgroup v2: one hierarchy for every controller.
			dir := filepath.Join("/sys/fs/cgroup", path)
			if exists(filepath.Join(dir, "memory.events")) {
				f.memEvents, f.oomKey, f.memMax = filepath.Join(dir, "memory.events"), "oom_kill", filepath.Join(dir, "memory.max")
			}
			if exists(filepath.Join(dir, "pids.events")) {
				f.pidsEvents, f.pidsMax = filepath.Join(dir, "pids.events"), filepath.Join(dir, "pids.max")
			}
		case hasController(ctrls, "memory"):
			if dir := v1Dir("memory", path, "memory.oom_control"); dir != "" {
				f.memEvents, f.oomKey, f.memMax = filepath.Join(dir, "memory.oom_control"), "oom_kill", filepath.Join(dir, "memory.limit_in_bytes")
			}
		case hasController(ctrls, "pids"):
			if dir := v1Dir("pids", path, "pids.events"); dir != "" {
				f.pidsEvents, f.pidsMax = filepath.Join(dir, "pids.events"), filepath.Join(dir, "pids.max")
			}
		}
	}
	return f
})

// v1Dir is the directory of a cgroup v1 controller's cgroup: at its path
// in the hierarchy on a host, at the hierarchy's root in a container (the
// engine mounts the container's own cgroup there).
func v1Dir(ctrl, path, file string) string {
	for _, dir := range []string{filepath.Join("/sys/fs/cgroup", ctrl, path), filepath.Join("/sys/fs/cgroup", ctrl)} {
		if exists(filepath.Join(dir, file)) {
			return dir
		}
	}
	return ""
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readCgroupCounters reads the counters: two small reads of cgroupfs at
// each start and exit.
func readCgroupCounters() cgroupCounters {
	f := theCgroupFiles()
	if f.memEvents == "" && f.pidsEvents == "" {
		return cgroupCounters{}
	}
	return cgroupCounters{
		ok:          true,
		oomKills:    keyedCounter(f.memEvents, f.oomKey),
		pidsRefused: keyedCounter(f.pidsEvents, "max"),
	}
}

// cgroupLimits reads the memory and pids limits (0: none), for the reason
// an exit gives.
func cgroupLimits() (mem, pids int64) {
	f := theCgroupFiles()
	return limit(f.memMax), limit(f.pidsMax)
}

// keyedCounter reads "key N" from a flat-keyed cgroup file (-1: absent).
func keyedCounter(path, key string) int64 {
	if path == "" {
		return -1
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// limit reads a cgroup limit file: its number; 0 for "max", v1's
// "unlimited" (a page-rounded 2^63-1) or a file that cannot be read.
func limit(path string) int64 {
	if path == "" {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n >= 1<<62 {
		return 0
	}
	return n
}
