package runner

import (
	"syscall"
	"testing"
)

// TestExitReason: the reason comes from the counters, not the signal: a
// SIGKILL is "out of memory" only when the OOM kills rose while it ran and
// agentd did not send it; refused forks are said whatever the exit.
func TestExitReason(t *testing.T) {
	limits := func() (int64, int64) { return 512 << 20, 256 }
	noLimits := func() (int64, int64) { return 0, 0 }
	at := func(oom, pids int64) cgroupCounters {
		return cgroupCounters{ok: true, oomKills: oom, pidsRefused: pids}
	}
	for _, tc := range []struct {
		name       string
		start, end cgroupCounters
		sig        syscall.Signal
		ours       bool
		limits     func() (int64, int64)
		want       string
	}{
		{"oom kill", at(3, 0), at(4, 0), syscall.SIGKILL, false, limits, "out of memory (limit 512 MiB)"},
		{"oom kill without a limit", at(0, 0), at(1, 0), syscall.SIGKILL, false, noLimits, "out of memory"},
		{"a SIGKILL agentd sent", at(0, 0), at(1, 0), syscall.SIGKILL, true, limits, ""},
		{"another signal", at(0, 0), at(1, 0), syscall.SIGTERM, false, limits, ""},
		{"a plain SIGKILL", at(2, 0), at(2, 0), syscall.SIGKILL, false, limits, ""},
		{"forks refused", at(0, 5), at(0, 9), 0, false, limits, "pids limit (256) reached"},
		{"both", at(0, 5), at(1, 6), syscall.SIGKILL, false, limits, "out of memory (limit 512 MiB); pids limit (256) reached"},
		{"nothing counted here", cgroupCounters{}, cgroupCounters{}, syscall.SIGKILL, false, limits, ""},
		{"counter absent", at(-1, -1), at(2, 3), syscall.SIGKILL, false, limits, ""},
	} {
		if got := exitReason(tc.start, tc.end, tc.sig, tc.ours, tc.limits); got != tc.want {
			t.Errorf("%s: exitReason = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := sizeOf(3 << 30); got != "3 GiB" {
		t.Errorf("sizeOf(3 GiB) = %q", got)
	}
	if got := sizeOf(1536 << 10); got != "1.5 MiB" {
		t.Errorf("sizeOf(1.5 MiB) = %q", got)
	}
}
