//go:build unix

package snapshot

import (
	"syscall"
	"time"
)

func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// childrenCPU is the CPU time of the child processes waited for so far.
func childrenCPU() time.Duration { return rusageCPU(syscall.RUSAGE_CHILDREN) }
