package sandboxes

import (
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// The policy's steps: the furthest one due moves a sandbox (never back
// toward running), a step turned off is skipped, and the next one is what
// sandbox ls says.
func TestPolicySteps(t *testing.T) {
	t.Parallel()
	def := policy{pauseAfter: 5 * time.Minute, stopAfter: 30 * time.Minute, deleteAfter: store.Never}
	noPause := policy{pauseAfter: store.Never, stopAfter: 30 * time.Minute, deleteAfter: 24 * time.Hour}
	for _, tc := range []struct {
		name     string
		p        policy
		state    string
		idle     time.Duration
		due      string // "-": none; "": delete
		next     string // "-": none
		nextLeft time.Duration
	}{
		{"fresh", def, store.SandboxRunning, time.Minute, "-", store.SandboxPaused, 4 * time.Minute},
		{"pause due", def, store.SandboxRunning, 6 * time.Minute, store.SandboxPaused, store.SandboxStopped, 24 * time.Minute},
		{"paused already", def, store.SandboxPaused, 6 * time.Minute, "-", store.SandboxStopped, 24 * time.Minute},
		{"both due: straight to stopped", def, store.SandboxRunning, 31 * time.Minute, store.SandboxStopped, "-", 0},
		{"stopped: nothing more", def, store.SandboxStopped, 40 * time.Hour, "-", "-", 0},
		{"pause off", noPause, store.SandboxRunning, 10 * time.Minute, "-", store.SandboxStopped, 20 * time.Minute},
		{"delete due", noPause, store.SandboxStopped, 25 * time.Hour, "", "-", 0},
		{"delete next", noPause, store.SandboxStopped, time.Hour, "-", "", 23 * time.Hour},
	} {
		s, ok := tc.p.due(tc.state, tc.idle)
		got := "-"
		if ok {
			got = s.to
		}
		if got != tc.due {
			t.Errorf("%s: due %q, want %q", tc.name, got, tc.due)
		}
		n, ok := tc.p.next(tc.state, tc.idle)
		got = "-"
		if ok {
			got = n.to
		}
		if got != tc.next || (ok && n.after-tc.idle != tc.nextLeft) {
			t.Errorf("%s: next %q in %v, want %q in %v", tc.name, got, n.after-tc.idle, tc.next, tc.nextLeft)
		}
	}
}

func TestRoughly(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 12*time.Minute + 20*time.Second: "12m", 65 * time.Minute: "1h5m", 2 * time.Hour: "2h",
		50 * time.Hour: "2d2h", 7 * 24 * time.Hour: "7d",
	} {
		if got := roughly(d); got != want {
			t.Errorf("roughly(%v) = %q, want %q", d, got, want)
		}
	}
}
