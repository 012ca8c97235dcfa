package ctl_test

import (
	"os/user"
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/ctl"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestActivityDirectNamesTheUID: `agentctl activity` on the daemon's
// socket names the caller by the uid the socket proved, not "local".
func TestActivityDirectNamesTheUID(t *testing.T) {
	t.Parallel()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	d.run(t, "", "stat", ".")
	r := d.run(t, "", "activity")
	if want := "uid:" + u.Uid + "(" + u.Username + ")"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("activity = %+v, want the actor %s", r, want)
	}
}

// TestActivityLineShowsTheClaim: a direct caller's unchecked claim is
// shown beside the actor, labelled; no claim shows nothing.
func TestActivityLineShowsTheClaim(t *testing.T) {
	t.Parallel()
	rec := &agentdv1.ActivityRecord{Actor: "uid:1000(alice)", ClaimedActor: "bob", Summary: "stat /w", Outcome: agentdv1.Outcome_OUTCOME_OK}
	line := ctl.ActivityLine(&hubv1.WatchResponse{Record: rec, MachineName: "local"})
	if want := "uid:1000(alice) (claims: bob)  stat /w  → ok"; !strings.Contains(line, want) {
		t.Errorf("ActivityLine = %q, want it to contain %q", line, want)
	}
	rec.ClaimedActor = ""
	if line := ctl.ActivityLine(&hubv1.WatchResponse{Record: rec}); strings.Contains(line, "claims") {
		t.Errorf("ActivityLine = %q shows a claim nobody made", line)
	}
}
