package activitylog

import (
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Limits bounds, at the hub, what one machine's account of its own
// work (ActivityService.Watch) may store, and the output the hub keeps of
// the calls it routes. Zero fields get the defaults named on them.
type Limits struct {
	// RecordBytes bounds one stored record of a daemon's account, as
	// JSON, after its output and text are cut (default 64 KiB).
	RecordBytes int
	// PerSecond is how many records per second a machine's account may
	// store on average (default 50); the excess is dropped and counted.
	PerSecond float64
	// Burst is how many records a machine's account may store at once
	// (default 500).
	Burst int
	// OutputBytes bounds the output the hub keeps of a routed command:
	// half from its start, half from its end (default 8 KiB).
	OutputBytes int
}

func (l *Limits) defaults() {
	if l.RecordBytes <= 0 {
		l.RecordBytes = 64 << 10
	}
	if l.PerSecond <= 0 {
		l.PerSecond = 50
	}
	if l.Burst <= 0 {
		l.Burst = 500
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = 8 << 10
	}
}

// daemonAccount is the hub's view of one machine's Watch stream while it
// lasts: its numbering, its rate and the size of its records. It is used
// by the one goroutine that reads the stream.
type daemonAccount struct {
	lim Limits
	now func() time.Time

	cursor uint64 // the last sequence number received in order
	run    uint64 // the last of the records received past a jump

	tokens  float64 // the rate limit's bucket
	last    time.Time
	dropped int // records dropped since the last note
}

func newDaemonAccount(lim Limits, cursor uint64, now func() time.Time) *daemonAccount {
	lim.defaults()
	return &daemonAccount{lim: lim, now: now, cursor: cursor, tokens: float64(lim.Burst), last: now()}
}

// admit decides whether a received record is stored (keep), and returns
// the hub's notes to store before it: a jump in the numbering, records
// dropped before it. It makes the record the daemon's account: the actor
// it names becomes its claim.
func (a *daemonAccount) admit(r *agentdv1.ActivityRecord) (notes []*agentdv1.ActivityRecord, keep bool) {
	now := a.now()
	a.tokens = min(float64(a.lim.Burst), a.tokens+now.Sub(a.last).Seconds()*a.lim.PerSecond)
	a.last = now
	if a.tokens < 1 {
		a.dropped++
		return nil, false
	}
	a.tokens--
	if n := a.droppedNote(); n != nil {
		notes = append(notes, n)
	}
	if r.GetSeq() == 0 || r.GetTime() == nil {
		// Nothing to number it by: the note says so, the record goes.
		return append(notes, &agentdv1.ActivityRecord{Kind: wire.KindActivityGap, Outcome: agentdv1.Outcome_OUTCOME_ERROR,
			Summary: fmt.Sprintf("the daemon sent a record without a sequence number or time (kind %q): not stored", cut(r.GetKind(), 100))}), false
	}
	switch seq := r.GetSeq(); {
	case seq == a.cursor+1 || a.cursor == 0:
		// In order, or the first record the hub has of the machine (a new
		// daemon's numbers start at the time in microseconds).
		a.cursor = seq
	case seq > a.cursor+1 && seq != a.run+1:
		notes = append(notes, &agentdv1.ActivityRecord{Kind: wire.KindActivityGap, Outcome: agentdv1.Outcome_OUTCOME_ERROR,
			Summary: fmt.Sprintf("the daemon's record numbers jumped from %d to %d: stored as it sent them, not trusted (the hub resumes after %d)", a.cursor, seq, a.cursor)})
		fallthrough
	case seq > a.cursor+1:
		a.run = seq
	}
	if r.Actor != "" && r.ClaimedActor == "" {
		r.ClaimedActor = r.Actor
	}
	r.Actor = ""
	r.Client = ""
	return notes, true
}

// droppedNote is the note of the records dropped since the last one (nil:
// none), and resets the count.
func (a *daemonAccount) droppedNote() *agentdv1.ActivityRecord {
	if a.dropped == 0 {
		return nil
	}
	n := a.dropped
	a.dropped = 0
	return &agentdv1.ActivityRecord{Kind: wire.KindActivityDropped, Outcome: agentdv1.Outcome_OUTCOME_ERROR, Bytes: int64(n),
		Summary: fmt.Sprintf("dropped %d records of the daemon's account: over its rate (%g a second, bursts of %d)", n, a.lim.PerSecond, a.lim.Burst)}
}

// encode is the record as JSON, at most lim.RecordBytes: its output and
// text are cut to fit (what was cut is said in its summary).
func (a *daemonAccount) encode(r *agentdv1.ActivityRecord) ([]byte, error) {
	b, err := protojson.Marshal(r)
	if err != nil || len(b) <= a.lim.RecordBytes {
		return b, err
	}
	// Base64 makes output 4/3 its size and escapes up to 6 times text:
	// a third of the budget for output, a fortieth for each text field.
	text := a.lim.RecordBytes / 40
	for _, s := range []*string{&r.Summary, &r.Command, &r.Cwd, &r.Path, &r.Error, &r.ObjectId, &r.ClaimedActor, &r.Conversation, &r.Kind} {
		*s = cut(*s, text)
	}
	if limit := a.lim.RecordBytes / 3; len(r.Output) > limit {
		r.Output = headTail(r.Output, limit)
	}
	r.Summary = cut(r.Summary+" (cut by the hub to fit its record limit)", text*2)
	if b, err = protojson.Marshal(r); err != nil || len(b) <= a.lim.RecordBytes {
		return b, err
	}
	r.Output = nil
	return protojson.Marshal(r)
}

// cut shortens s to at most n bytes, on a rune boundary, marked with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n-len("…"), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// headTail keeps n bytes of b: half from its start, half from its end.
func headTail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return joinHeadTail(b[:n/2], b[len(b)-(n-n/2):], int64(len(b)-n))
}

// joinHeadTail is head, a mark saying how many bytes were omitted between
// it and tail (none: no mark), and tail, in a new slice. Every output the
// hub keeps in part (a routed command's, a daemon's record's) reads so.
func joinHeadTail(head, tail []byte, omitted int64) []byte {
	out := make([]byte, 0, len(head)+len(tail)+32)
	out = append(out, head...)
	if omitted > 0 {
		out = fmt.Appendf(out, "\n[… %d bytes …]\n", omitted)
	}
	return append(out, tail...)
}
