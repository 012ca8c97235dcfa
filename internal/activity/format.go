package activity

import (
	"fmt"
	"strings"
	"time"
)

// Line renders r for a person, one line: time, actor, what, outcome. The
// sequence number is left out: a new log numbers from the clock in µs, so
// it is a long number that says nothing to a person (--json has it).
//
//	2026-12-02 11:47:03  alice  ran `go test ./...` in /home/u/src  → exit 0 (1.2s)
//	2026-12-02 11:48:10  uid:1000(u) (claims: bob)  stat /home/u/src  → ok
func (r Record) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  ", r.Time.Local().Format(time.DateTime))
	actor := r.Actor
	if actor == "" {
		actor = "local"
	}
	b.WriteString(actor)
	if r.ClaimedActor != "" {
		fmt.Fprintf(&b, " (claims: %s)", r.ClaimedActor)
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
		if strings.HasPrefix(r.Kind, "process.") && r.Kind != "process.start" {
			fmt.Fprintf(&b, "  → exit %d", r.ExitCode)
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
