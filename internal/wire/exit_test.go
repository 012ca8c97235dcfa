package wire

import "testing"

// A process's end reads as a shell reports it: 124 when its timeout
// killed it, 128+N when signal N did, else its own code.
func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		code, signal int
		timedOut     bool
		want         int
	}{
		{"exited 0", 0, 0, false, 0},
		{"exited 3", 3, 0, false, 3},
		{"SIGKILL", 0, 9, false, 137},
		{"SIGTERM", 0, 15, false, 143},
		{"timed out (and killed)", 0, 9, true, 124},
		{"timed out", 1, 0, true, 124},
	} {
		if got := ExitCode(tc.code, tc.signal, tc.timedOut); got != tc.want {
			t.Errorf("%s: ExitCode(%d, %d, %v) = %d, want %d", tc.name, tc.code, tc.signal, tc.timedOut, got, tc.want)
		}
	}
}
