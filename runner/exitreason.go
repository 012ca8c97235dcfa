package runner

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/devdepot-ai/agentd/internal/units"
)

// cgroupCounters are what the kernel counts, in the cgroup the commands
// run in, of the reasons it ends or refuses processes. A process's exit
// compares them with their values when it started.
type cgroupCounters struct {
	ok          bool
	oomKills    int64 // memory.events oom_kill (-1: not counted)
	pidsRefused int64 // pids.events max: forks refused at pids.max (-1: not counted)
}

// exitReason says why the system ended (or hampered) a process, from the
// cgroup's counters at its start and at its end: an OOM kill while it ran
// and its death by SIGKILL that agentd did not send is "out of memory",
// and forks refused at the pids limit while it ran are said once. "" when
// neither happened or nothing is counted here.
func exitReason(start, end cgroupCounters, sig syscall.Signal, killedByUs bool, limits func() (mem, pids int64)) string {
	if !start.ok || !end.ok {
		return ""
	}
	oom := sig == syscall.SIGKILL && !killedByUs && start.oomKills >= 0 && end.oomKills > start.oomKills
	forks := start.pidsRefused >= 0 && end.pidsRefused > start.pidsRefused
	if !oom && !forks {
		return ""
	}
	memMax, pidsMax := limits()
	var reasons []string
	if oom {
		if memMax > 0 {
			reasons = append(reasons, fmt.Sprintf("out of memory (limit %s)", sizeOf(memMax)))
		} else {
			reasons = append(reasons, "out of memory")
		}
	}
	if forks {
		if pidsMax > 0 {
			reasons = append(reasons, fmt.Sprintf("pids limit (%d) reached", pidsMax))
		} else {
			reasons = append(reasons, "pids limit reached")
		}
	}
	return strings.Join(reasons, "; ")
}

// sizeOf renders a limit as people set it: "512 MiB", "2 GiB".
func sizeOf(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}} {
		if n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return units.Bytes(n)
}
