//go:build !linux

package runner

// readCgroupCounters: only Linux's cgroups say why the kernel ended a
// process; elsewhere an exit has no reason.
func readCgroupCounters() cgroupCounters { return cgroupCounters{} }

// cgroupLimits: none known.
func cgroupLimits() (mem, pids int64) { return 0, 0 }
