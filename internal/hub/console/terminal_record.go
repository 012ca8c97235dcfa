package console

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// inputFlushAfter is how long recorded keystrokes wait for more before
// they are stored (a line typed is stored at its Enter).
const inputFlushAfter = 5 * time.Second

// typedBytes counts keystrokes and, with recording on, keeps them for the
// next terminal.input record: at Enter, at inputRecordAt bytes, or when
// they have waited inputFlushAfter.
func (t *terminal) typedBytes(ctx context.Context, b []byte) {
	t.mu.Lock()
	t.in += int64(len(b))
	if !t.c.opts.RecordTerminalInput {
		t.mu.Unlock()
		return
	}
	if len(t.typed) == 0 {
		t.typedWhen = t.c.opts.Now()
	}
	t.typed = append(t.typed, b...)
	t.mu.Unlock()
	t.flushTyped(ctx, false)
}

// flushTyped stores the kept keystrokes when it is time (or now, all).
func (t *terminal) flushTyped(ctx context.Context, all bool) {
	t.mu.Lock()
	if len(t.typed) == 0 {
		t.mu.Unlock()
		return
	}
	last := t.typed[len(t.typed)-1]
	if !all && last != '\r' && last != '\n' && len(t.typed) < inputRecordAt && t.c.opts.Now().Sub(t.typedWhen) < inputFlushAfter {
		t.mu.Unlock()
		return
	}
	typed, id := t.typed, t.id
	t.typed = nil
	t.mu.Unlock()
	t.c.opts.Backend.Record(ctx, t.machine, &agentdv1.ActivityRecord{
		Actor: t.who, Kind: KindTerminalInput, ObjectId: id, Bytes: int64(len(typed)), Output: typed,
		Summary: fmt.Sprintf("typed %s into terminal %s on %s", quoteTyped(typed), id, t.machine),
		Outcome: agentdv1.Outcome_OUTCOME_OK,
	})
}

// quoteTyped shows keystrokes in a summary: quoted, control keys escaped
// (Enter is \r), at most 200 bytes of them.
func quoteTyped(b []byte) string {
	if len(b) > 200 {
		return strconv.Quote(string(b[:200])) + fmt.Sprintf(" and %d bytes more", len(b)-200)
	}
	return strconv.Quote(string(b))
}

// record stores the hub's record of this page's time on the terminal.
func (t *terminal) record(ctx context.Context, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.id == "" && err == nil {
		return // nothing was opened
	}
	verb := "opened"
	if t.reattach {
		verb = "reattached to"
	}
	how := "left it running (page closed or connection lost; it can be reattached)"
	switch {
	case t.ended && t.exit != "":
		how = "ended it (End session): the shell " + t.exit
	case t.ended:
		how = "ended it (End session)"
	case t.exit != "":
		how = "the shell " + t.exit
	case t.signedOut:
		how = "the session ended (signed out or token revoked), the shell left running"
	}
	r := &agentdv1.ActivityRecord{
		Actor: t.who, Kind: KindTerminal, ObjectId: t.id, Bytes: t.in + t.out,
		Duration: durationpb.New(t.c.opts.Now().Sub(t.began)), Outcome: agentdv1.Outcome_OUTCOME_OK,
		Summary: fmt.Sprintf("%s a terminal on %s; %s; %d bytes typed, %d bytes shown", verb, t.machine, how, t.in, t.out),
	}
	if err != nil {
		r.Outcome, r.Error = agentdv1.Outcome_OUTCOME_ERROR, err.Error()
		r.Summary = fmt.Sprintf("could not open a terminal on %s: %v", t.machine, err)
	}
	t.c.opts.Backend.Record(ctx, t.machine, r)
}
