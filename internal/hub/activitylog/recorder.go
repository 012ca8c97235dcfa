// Package activitylog is the hub's record of what happens in each org: the
// hub's own records of the calls it routes (the actor from the caller's
// token, the command, its exit and output read from the proxied frames),
// of what it refuses and does itself, and each machine's account of its own
// work, collected from the machine's ActivityService.Watch while its tunnel
// is up.
//
// The two are kept apart. What the hub records is fact, stored under the
// org's "hub" pseudo-machine (store.SourceHub). What a daemon reports is its
// account (store.SourceDaemon): bounded in size and rate (Limits), its
// numbering checked, the actor it names kept only as its claim. Secret
// values delivered to a sandbox are redacted from every record about it
// before it is stored; a sandbox holding secrets whose values this process
// does not know gets its records' text withheld.
//
// A Recorder never waits on its callers' paths: a routed call's record is
// handed to a writer that stores records in batches, dropping (and
// counting) them when the store falls behind.
package activitylog

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Store is what the recorder needs of the hub's store.
type Store interface {
	Machine(ctx context.Context, id string) (store.Machine, error)
	CreateMachine(ctx context.Context, m store.Machine) (store.Machine, error)
	MachineSeen(ctx context.Context, id string, at time.Time, version string) error
	Sandbox(ctx context.Context, id string) (store.Sandbox, error)
	AppendActivity(ctx context.Context, machineID string, recs []store.Activity) error
	LastSeq(ctx context.Context, machineID string) (uint64, error)
}

// Options configure a Recorder.
type Options struct {
	// Store keeps the records. Required.
	Store Store
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger gets what cannot be stored (default: none).
	Logger *zap.Logger
	// Limits bound a daemon's account and the output kept of a routed
	// command (defaults on its fields).
	Limits Limits
	// Conn returns the connection over a machine's tunnel held by this
	// hub, to collect its account (false: not held here). Required.
	Conn func(machineID string) (grpc.ClientConnInterface, bool)
	// Drain is called when a machine says it is shutting down (its
	// account's wire.KindStop): offline from now on, while its last calls
	// finish. Nil: nothing is done.
	Drain func(machineID string)
	// Pulse is called after records were stored, to tell other replicas'
	// watchers; it must not wait. Nil: nothing is told.
	Pulse func()
}

// Recorder stores an org's activity: the hub's records and the machines'
// accounts, collected while their tunnels are up. Close stops it, Wait
// waits until what it received is stored.
type Recorder struct {
	store Store
	now   func() time.Time
	log   *zap.Logger
	lim   Limits
	conn  func(string) (grpc.ClientConnInterface, bool)
	drain func(string)
	pulse func()

	ctx    context.Context // lives until Close
	cancel context.CancelFunc

	secrets *redactor     // the secret values of the sandboxes, redacted from their records
	calls   *callWriter   // stores the hub's records of the calls it routed
	seq     atomic.Uint64 // the last sequence number of the hub's own records

	mu      sync.Mutex
	cancels map[string]context.CancelFunc // machine -> its collector
	running map[string]int                // machine -> its collectors still storing
	retired map[string]bool               // sandboxes gone whose secrets go with their last collector
	changed chan struct{}                 // closed and replaced on every stored batch
	wg      sync.WaitGroup
}

// New returns a Recorder storing in opts.Store, its call writer started.
func New(opts Options) (*Recorder, error) {
	if opts.Store == nil || opts.Conn == nil {
		return nil, errs.New(errs.Invalid, "activitylog: no store or no tunnels")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Drain == nil {
		opts.Drain = func(string) {}
	}
	if opts.Pulse == nil {
		opts.Pulse = func() {}
	}
	opts.Limits.defaults()
	h := &Recorder{store: opts.Store, now: opts.Now, log: opts.Logger, lim: opts.Limits, conn: opts.Conn, drain: opts.Drain, pulse: opts.Pulse,
		cancels: map[string]context.CancelFunc{}, running: map[string]int{}, retired: map[string]bool{},
		changed: make(chan struct{}), secrets: newRedactor()}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.secrets.holds = func(id string) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		sb, err := h.store.Sandbox(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil // gone: nothing is delivered to it any more
		}
		return sb.HoldsSecrets, err
	}
	h.calls = newCallWriter(h)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.calls.run(h.ctx)
	}()
	return h, nil
}

// Close stops the collectors and the call writer (which stores the calls
// still queued first); Wait waits for them.
func (h *Recorder) Close() { h.cancel() }

// Wait returns once the collectors and the call writer have stopped.
func (h *Recorder) Wait() { h.wg.Wait() }

// Hold remembers the secret values delivered to a sandbox: they are
// redacted from the records about it until SandboxGone.
func (h *Recorder) Hold(sandboxID string, values map[string][]byte) {
	h.secrets.hold(sandboxID, values)
}

// Changed returns a channel closed at the next stored activity or machine
// tunnel coming up or going down (Notify).
func (h *Recorder) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// MachineUp starts collecting the account of a machine whose tunnel came
// up here (a collector already running for it is replaced).
func (h *Recorder) MachineUp(id string) {
	defer h.Notify() // the console's machine pages follow tunnels too
	h.mu.Lock()
	defer h.mu.Unlock()
	if cancel, ok := h.cancels[id]; ok {
		cancel()
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.cancels[id] = cancel
	h.running[id]++
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer h.collected(id)
		defer cancel()
		h.collect(ctx, id)
	}()
}

// collected is called when a collector of the machine has stored its last
// record: a sandbox gone takes its secret values with its last one.
func (h *Recorder) collected(id string) {
	h.mu.Lock()
	h.running[id]--
	forget := h.running[id] == 0 && h.retired[id]
	if h.running[id] == 0 {
		delete(h.running, id)
		delete(h.retired, id)
	}
	h.mu.Unlock()
	if forget {
		h.secrets.forget(id)
	}
}

// SandboxGone forgets a removed sandbox's secret values once the records
// still arriving from it are stored (redacted).
func (h *Recorder) SandboxGone(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[id] > 0 {
		h.retired[id] = true
		return
	}
	h.secrets.forget(id)
}

// MachineDown forgets the machine's collector without cancelling it: its
// Watch ends by itself when the tunnel's connection closes, after the
// records already received are stored (the last of them, a shutdown's
// exit records, arrive just before the tunnel closes).
func (h *Recorder) MachineDown(id string) {
	defer h.Notify()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.cancels, id)
}

// Notify wakes the watchers (Changed): activity was stored, here or on
// another replica, or a tunnel came up or went down.
func (h *Recorder) Notify() {
	h.mu.Lock()
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

// storeTimeout bounds storing one received activity record.
const storeTimeout = 10 * time.Second

// collect follows one machine's activity until its tunnel goes away. What
// it receives is the daemon's account of its own work, stored as such
// (store.SourceDaemon) and never with an actor the hub did not
// authenticate: the actor the daemon names is kept as its claim. The
// account is bounded here: each record's size, how many a machine stores
// per second, and its numbering (see daemonAccount).
func (h *Recorder) collect(ctx context.Context, id string) {
	// Not log.With: a logger made per tunnel holds an encoded copy of its
	// fields for as long as the tunnel is up, which idle tunnels pay for.
	log, machine := h.log, zap.String("machine", id)
	cc, ok := h.conn(id)
	if !ok {
		return
	}
	m, err := h.store.Machine(ctx, id)
	if err != nil {
		log.Warn("activity: machine", machine, zap.Error(err))
		return
	}
	since, err := h.store.LastSeq(ctx, id)
	if err != nil {
		log.Warn("activity: last sequence", machine, zap.Error(err))
		return
	}
	// The watch first: a daemon stopping right after it connected sends
	// its last records only to a watch already open (and the rest after
	// its restart, when this resumes after the last stored one).
	st, err := agentdv1.NewActivityServiceClient(cc).Watch(ctx, &agentdv1.WatchRequest{SinceSeq: since})
	if err != nil {
		return
	}
	if info, err := agentdv1.NewSystemServiceClient(cc).Info(ctx, &agentdv1.InfoRequest{}); err == nil {
		_ = h.store.MachineSeen(ctx, id, h.now(), info.GetVersion())
	}
	acct := newDaemonAccount(h.lim, since, h.now)
	// Stored even when the collector is being cancelled (a replaced
	// tunnel, a hub shutting down): a record received is not dropped.
	storeCtx := context.WithoutCancel(ctx)
	defer func() {
		if note := acct.droppedNote(); note != nil {
			h.Record(storeCtx, m.OrgID, id, note)
		}
	}()
	for {
		msg, err := st.Recv()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) && status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
				log.Info("activity watch ended", machine, zap.Error(err))
			}
			return
		}
		r := msg.GetRecord()
		if r.GetKind() == wire.KindStop {
			// The daemon is shutting down: offline now, while its last
			// calls (and this watch) finish on the tunnel.
			h.drain(id)
		}
		notes, keep := acct.admit(r)
		for _, n := range notes {
			h.Record(storeCtx, m.OrgID, id, n)
		}
		if !keep {
			continue
		}
		h.secrets.redact(id, r)
		b, err := acct.encode(r)
		if err != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(storeCtx, storeTimeout)
		err = h.store.AppendActivity(sctx, id, []store.Activity{{Seq: r.GetSeq(), Time: r.GetTime().AsTime(), Record: b, Source: store.SourceDaemon}})
		cancel()
		if err != nil {
			log.Warn("activity: store", machine, zap.Error(err))
			continue
		}
		h.Notify()
		h.pulse()
	}
}
