package sandboxes

import (
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// The reasons a step's why becomes, and the exit they give: a stop's
// processes are killed by TERM, a delete's by KILL, each with the reason.
func TestStepReasons(t *testing.T) {
	t.Parallel()
	for why, want := range map[string]string{
		"idle 30m":                                 "sandbox stopped: idle 30m",
		"stopped by alice":                         "sandbox stopped by alice",
		"stopped to be archived: idle 7d":          "sandbox archived: idle 7d",
		"stopped to be archived by alice":          "sandbox archived by alice",
		"stopped: the environment's image changed": "sandbox stopped: the environment's image changed",
		"stoppedx":                                 "sandbox stopped: stoppedx",
	} {
		if got := stopReason(why); got != want {
			t.Errorf("stopReason(%q) = %q, want %q", why, got, want)
		}
	}
	for why, want := range map[string]string{
		"removed by alice":                     "sandbox deleted by alice",
		"its environment was removed by alice": "sandbox deleted: its environment was removed by alice",
		"idle 7d (delete after 7d)":            "sandbox deleted: idle 7d (delete after 7d)",
	} {
		if got := deleteReason(why); got != want {
			t.Errorf("deleteReason(%q) = %q, want %q", why, got, want)
		}
	}
	at := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	for reason, sig := range map[string]string{"sandbox stopped: idle 30m": "TERM", "sandbox archived by alice": "TERM", "sandbox deleted by alice": "KILL"} {
		info := endedInfo(store.SandboxProcess{ID: "p-1", Info: []byte(`{"id":"p-1","argv":["sleep","600"],"startTime":"2026-12-05T00:00:00Z","stdinOpen":true}`), EndedAt: at, Reason: reason})
		x := info.GetExited()
		if x.GetSignal() != sig || x.GetExitCode() != -1 || x.GetReason() != reason || x.GetDuration().AsDuration() != time.Hour ||
			info.GetStdinOpen() || info.GetArgv()[0] != "sleep" {
			t.Errorf("endedInfo for %q: %v, want killed by %s after 1h, the reason, stdin closed", reason, info, sig)
		}
	}
	if info := endedInfo(store.SandboxProcess{ID: "p-2", Info: []byte("not json"), Reason: "r"}); info.GetId() != "p-2" || info.GetExited().GetReason() != "r" {
		t.Errorf("endedInfo of an unreadable record: %v, want its id and reason", info)
	}
}
