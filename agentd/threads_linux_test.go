package agentd

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// threads counts this process's OS threads.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

// reserveThreads leaves the threads it made alive and idle: a sandbox's
// agentd keeps them for when the pids limit allows no new one.
func TestReserveThreads(t *testing.T) {
	before := threads(t)
	reserveThreads(before + 20)
	if after := threads(t); after < before+20 {
		t.Errorf("%d threads after reserving %d more than %d, want at least %d", after, 20, before, before+20)
	}
}
