package activitylog

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// hubMachineID is the org's "hub" pseudo-machine, under whose sequence
// numbers the hub's own records are stored: an sb- id with a key nobody
// holds, so it never connects, and is listed neither as a machine nor as a
// sandbox.
func hubMachineID(orgID string) string { return "sb-hub-" + orgID }

// ensureHubMachine makes the org's hub pseudo-machine if it is not there.
func (h *Recorder) ensureHubMachine(ctx context.Context, orgID string) error {
	id := hubMachineID(orgID)
	_, err := h.store.Machine(ctx, id)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	_, err = h.store.CreateMachine(ctx, store.Machine{ID: id, OrgID: orgID, Name: "hub", Hostname: "hub", OS: "-", Arch: "-",
		PublicKey: pub, CreatedAt: h.now()})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// Record stores one record of the hub's own about subject (empty: the
// org's hub itself; a machine or sandbox: redacted as its records are),
// in org orgID's stream: it sets the record's sequence number and time.
// It is stored even if ctx is cancelled; what fails is logged.
func (h *Recorder) Record(ctx context.Context, orgID, subject string, r *agentdv1.ActivityRecord) {
	ctx = context.WithoutCancel(ctx)
	if err := h.ensureHubMachine(ctx, orgID); err != nil {
		h.log.Warn("activity: the hub's record", zap.Error(err))
		return
	}
	a, ok := h.hubActivity(subject, r, h.now())
	if !ok {
		return
	}
	if err := h.store.AppendActivity(ctx, hubMachineID(orgID), []store.Activity{a}); err != nil {
		h.log.Warn("activity: the hub's record", zap.Error(err))
		return
	}
	h.Notify()
	h.pulse()
}

// hubActivity is the record to store of the hub's own about subject,
// numbered and timed now unless it has a time already (a call's start).
func (h *Recorder) hubActivity(subject string, r *agentdv1.ActivityRecord, now time.Time) (store.Activity, bool) {
	if r.Time == nil {
		r.Time = timestamppb.New(now)
	}
	r.Seq = h.nextSeq(now)
	if subject != "" {
		h.secrets.redact(subject, r)
	}
	b, err := protojson.Marshal(r)
	if err != nil {
		return store.Activity{}, false
	}
	return store.Activity{Seq: r.Seq, Time: r.Time.AsTime(), Record: b, Source: store.SourceHub, Subject: subject}, true
}

// nextSeq numbers the hub's own records: the time in microseconds, or
// one past the last number when records come faster than that (the egress
// proxy's, from concurrent connections), so none collides with another.
func (h *Recorder) nextSeq(now time.Time) uint64 {
	for {
		last := h.seq.Load()
		seq := max(uint64(now.UnixMicro()), last+1)
		if h.seq.CompareAndSwap(last, seq) {
			return seq
		}
	}
}

// Call is the hub's record of one call it routes, filled in as the
// call goes: who (from the caller's token), what, where, and for
// ProcessService Start and Attach, the command, its exit and its output
// (bounded) read from the proxied stream.
type Call struct {
	w       *callWriter
	orgID   string
	subject string // the machine or sandbox the call went to
	method  string
	start   time.Time
	proc    procStream // set: a Start or Attach, whose frames are read

	// mu guards rec and upSeen: the caller's frames are read on the
	// proxy's upload goroutine, which a cancelled call may leave running.
	mu     sync.Mutex
	rec    *agentdv1.ActivityRecord
	upSeen bool
	note   string
}

// Note adds what the hub did around the call ("resumed from stopped in
// 240 ms", "sandbox stopped: idle 30m") to its record's summary.
func (c *Call) Note(note string) {
	if c == nil || note == "" {
		return
	}
	c.mu.Lock()
	if c.note != "" {
		note = c.note + "; " + note
	}
	c.note = cut(note, 300)
	c.mu.Unlock()
}

// NewCall starts the record of a call to method, routed to machine id
// (the machine or sandbox the route chose; env, the environment the caller
// named, if any), made by actor with the client program and conversation
// the caller named. The router hands it to the proxy, which calls Up and
// Down with the frames as they pass and Finish with how the call ended.
func (h *Recorder) NewCall(orgID, actor, client, conv, env, id, method string) *Call {
	short := strings.TrimPrefix(method, "/agentd.v1.")
	summary := "called " + short
	if env != "" {
		summary += " (environment " + cut(env, 100) + ")"
	}
	c := &Call{w: h.calls, orgID: orgID, subject: id, method: method, start: h.now(),
		rec: &agentdv1.ActivityRecord{Actor: actor, Client: cut(client, 200), Conversation: cut(conv, 200), Kind: wire.KindCall, Summary: summary}}
	switch method {
	case methodStart, methodAttach:
		c.proc.init(h.lim.OutputBytes)
	}
	return c
}

// Up reads a frame from the caller: the first of a Start or an Attach
// (its request). It returns at once for every other call.
func (c *Call) Up(data mem.BufferSlice) {
	if c == nil || !c.proc.on {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.upSeen {
		return
	}
	c.upSeen = true
	b := data.Materialize() // one small request per call
	switch c.method {
	case methodStart:
		cmd, cwd := parseStartRequest(b)
		c.rec.Command, c.rec.Cwd = cut(cmd, 4096), cut(cwd, 1024)
	case methodAttach:
		c.rec.ObjectId = cut(parseAttachRequest(b), 100)
	}
}

// Down reads a frame from the machine: the events of a Start or an Attach.
func (c *Call) Down(data mem.BufferSlice) {
	if c == nil || !c.proc.on {
		return
	}
	c.proc.event(data)
}

// Finish completes the record with how the call ended and hands it to the
// writer.
func (c *Call) Finish(err error) {
	if c == nil {
		return
	}
	now := c.w.h.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upSeen = true // a frame read late changes nothing now: the writer has the record
	r := c.rec
	r.Time = timestamppb.New(c.start)
	r.Duration = durationpb.New(now.Sub(c.start))
	r.Outcome = agentdv1.Outcome_OUTCOME_OK
	if err != nil {
		// As the caller gets it: a domain error as rpcerr makes it a status.
		r.Outcome, r.Error = agentdv1.Outcome_OUTCOME_ERROR, cut(rpcerr.Code(err).String()+": "+rpcerr.Message(err), 1024)
	}
	if c.proc.on {
		p := &c.proc
		if p.id != "" {
			r.ObjectId = cut(p.id, 100)
		}
		r.Output = p.output()
		what := "ran"
		if c.method == methodAttach {
			what = "attached to " + r.ObjectId
		} else if r.Command != "" {
			what = "ran `" + cut(r.Command, 200) + "`"
		}
		why := ""
		if p.reason != "" {
			why = ": " + p.reason // out of memory, a sandbox's stop
		}
		switch {
		case p.exited && p.timedOut:
			r.Outcome, r.ExitCode, r.Error = agentdv1.Outcome_OUTCOME_ERROR, p.code, "timed out"
			r.Summary += ": " + what + ", timed out"
		case p.exited && p.signal != "":
			r.Outcome, r.ExitCode, r.Error = agentdv1.Outcome_OUTCOME_ERROR, p.code, "killed by "+cut(p.signal, 20)+why
			r.Summary += ": " + what + ", killed by " + cut(p.signal, 20) + why
		case p.exited:
			r.ExitCode = p.code
			r.Summary += fmt.Sprintf(": %s, exit %d%s", what, p.code, why)
		case err == nil:
			r.Summary += ": " + what + ", detached before it ended"
		default:
			r.Summary += ": " + what
		}
	}
	if err != nil {
		r.Summary += ": " + cut(rpcerr.Message(err), 200)
	}
	if c.note != "" {
		r.Summary += " (" + c.note + ")"
	}
	c.w.add(c)
}

// callWriter stores the hub's records of routed calls in batches, off the
// calls' paths: a call never waits for the store. When the store falls
// behind by more than its queue, records are dropped and counted.
type callWriter struct {
	h     *Recorder
	queue chan *Call

	mu      sync.Mutex
	dropped map[string]int64 // org -> records not stored since its last note
}

// callQueue is how many finished calls may wait to be stored.
const callQueue = 4096

func newCallWriter(h *Recorder) *callWriter {
	return &callWriter{h: h, queue: make(chan *Call, callQueue), dropped: map[string]int64{}}
}

func (w *callWriter) add(c *Call) {
	select {
	case w.queue <- c:
	default:
		w.mu.Lock()
		w.dropped[c.orgID]++
		w.mu.Unlock()
	}
}

// run stores queued records until ctx ends, then the ones still queued.
func (w *callWriter) run(ctx context.Context) {
	for {
		select {
		case c := <-w.queue:
			w.store(context.WithoutCancel(ctx), c)
		case <-ctx.Done():
			for {
				select {
				case c := <-w.queue:
					w.store(context.WithoutCancel(ctx), c)
				default:
					return
				}
			}
		}
	}
}

// store writes c and whatever else is queued for the same org (at most a
// batch), in one transaction.
func (w *callWriter) store(ctx context.Context, c *Call) {
	const batch = 256
	h := w.h
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := h.ensureHubMachine(ctx, c.orgID); err != nil {
		h.log.Warn("activity: the hub's record of a call", zap.Error(err))
		return
	}
	now := h.now()
	var recs []store.Activity
	var later []*Call
	add := func(c *Call) {
		if a, ok := h.hubActivity(c.subject, c.rec, now); ok {
			recs = append(recs, a)
		}
	}
	add(c)
	w.mu.Lock()
	n := w.dropped[c.orgID]
	delete(w.dropped, c.orgID)
	w.mu.Unlock()
	if n > 0 {
		note := &agentdv1.ActivityRecord{Kind: wire.KindActivityDropped, Outcome: agentdv1.Outcome_OUTCOME_ERROR, Bytes: n,
			Summary: fmt.Sprintf("the hub could not record %d calls: its store fell behind", n)}
		if a, ok := h.hubActivity("", note, now); ok {
			recs = append(recs, a)
		}
	}
more:
	for len(recs) < batch {
		select {
		case o := <-w.queue:
			if o.orgID == c.orgID {
				add(o)
			} else {
				later = append(later, o)
			}
		default:
			break more
		}
	}
	if err := h.store.AppendActivity(ctx, hubMachineID(c.orgID), recs); err != nil {
		h.log.Warn("activity: the hub's records of calls", zap.Error(err), zap.Int("records", len(recs)))
	} else {
		h.Notify()
		h.pulse()
	}
	for _, o := range later {
		w.store(ctx, o)
	}
}

// Methods whose frames the call record reads.
const (
	methodStart  = "/agentd.v1.ProcessService/Start"
	methodAttach = "/agentd.v1.ProcessService/Attach"
)
