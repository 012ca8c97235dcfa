package activity

import (
	"fmt"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/wire"
)

// Line renders r for a person, one line: time, actor, what, outcome. It is
// the one renderer of activity: `agentd log` prints it, and agentctl
// renders the records it gets from a daemon or the hub with LineOn. The
// sequence number is left out: a new log numbers from the clock in µs, so
// it is a long number that says nothing to a person (--json has it).
//
//	2026-12-02 11:47:03  alice  ran `go test ./...` in /home/u/src  → exit 0 (1.2s)
//	2026-12-02 11:48:10  uid:1000(u) (claims: bob)  stat /home/u/src  → ok
func (r Record) Line() string { return r.LineOn("") }

// LineOn is Line with the machine the record comes from (its name, or its
// id) as a column after the time; an empty machine is no column.
//
// The outcome reads "→ exit N" only on a process's exit record (the one
// kind that has an exit code), "→ started ID" on a start, "→ error: …" on a
// failure and "→ ok" otherwise.
func (r Record) LineOn(machine string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  ", r.Time.Local().Format(time.DateTime))
	if machine != "" {
		fmt.Fprintf(&b, "%-10s ", machine)
	}
	actor := r.Actor
	if actor == "" {
		actor = "agentd" // the daemon's own record: a stop, a revoke's signals
	}
	b.WriteString(actor)
	if r.ClaimedActor != "" {
		fmt.Fprintf(&b, " (claims: %s)", r.ClaimedActor)
	}
	if r.Client != "" {
		fmt.Fprintf(&b, " via %s", r.Client)
	}
	if r.Conversation != "" {
		fmt.Fprintf(&b, " (%s)", r.Conversation)
	}
	b.WriteString("  ")
	b.WriteString(r.Summary)
	switch r.Outcome {
	case Failed:
		fmt.Fprintf(&b, "  → error: %s", oneLine(r.Error))
	case Started:
		if r.ObjectID != "" {
			fmt.Fprintf(&b, "  → started %s", r.ObjectID)
		}
	case OK:
		if r.Kind == wire.KindProcessExit {
			fmt.Fprintf(&b, "  → exit %d", r.ExitCode)
			if r.Error != "" {
				fmt.Fprintf(&b, ": %s", oneLine(r.Error))
			}
		} else {
			b.WriteString("  → ok")
		}
	}
	if r.Duration > 0 {
		fmt.Fprintf(&b, " (%s)", r.Duration.Round(time.Millisecond))
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
