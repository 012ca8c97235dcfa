package hub

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// activityHub collects every machine's activity while its tunnel is up
// (ActivityService.Watch on the machine, resumed from the last stored
// sequence number), stores it, and serves it to the org's watchers.
type activityHub struct {
	hubv1.UnimplementedActivityServiceServer
	s *Server

	secrets *redactor   // the secret values of the sandboxes, redacted from their records
	calls   *callWriter // stores the hub's records of the calls it routed

	mu      sync.Mutex
	cancels map[string]context.CancelFunc // machine -> its collector
	running map[string]int                // machine -> its collectors still storing
	retired map[string]bool               // sandboxes gone whose secrets go with their last collector
	changed chan struct{}                 // closed and replaced on every stored batch
	wg      sync.WaitGroup
}

func newActivityHub(s *Server) *activityHub {
	h := &activityHub{s: s, cancels: map[string]context.CancelFunc{}, running: map[string]int{}, retired: map[string]bool{},
		changed: make(chan struct{}), secrets: newRedactor()}
	h.secrets.holds = func(id string) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		sb, err := s.store.Sandbox(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil // gone: nothing is delivered to it any more
		}
		return sb.HoldsSecrets, err
	}
	h.calls = newCallWriter(h)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.calls.run(s.ctx)
	}()
	return h
}

func (h *activityHub) machineUp(id string) {
	defer h.notify() // the console's machine pages follow tunnels too
	h.mu.Lock()
	defer h.mu.Unlock()
	if cancel, ok := h.cancels[id]; ok {
		cancel()
	}
	ctx, cancel := context.WithCancel(h.s.ctx)
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
func (h *activityHub) collected(id string) {
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

// sandboxGone forgets a removed sandbox's secret values once the records
// still arriving from it are stored (redacted).
func (h *activityHub) sandboxGone(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[id] > 0 {
		h.retired[id] = true
		return
	}
	h.secrets.forget(id)
}

// machineDown forgets the machine's collector without cancelling it: its
// Watch ends by itself when the tunnel's connection closes, after the
// records already received are stored (the last of them, a shutdown's
// exit records, arrive just before the tunnel closes).
func (h *activityHub) machineDown(id string) {
	defer h.notify()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.cancels, id)
}

func (h *activityHub) wait() { h.wg.Wait() }

func (h *activityHub) notify() {
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
func (h *activityHub) collect(ctx context.Context, id string) {
	// Not log.With: a logger made per tunnel holds an encoded copy of its
	// fields for as long as the tunnel is up, which idle tunnels pay for.
	log, machine := h.s.log, zap.String("machine", id)
	cc, ok := h.s.fleet.Get(id)
	if !ok {
		return
	}
	m, err := h.s.store.Machine(ctx, id)
	if err != nil {
		log.Warn("activity: machine", machine, zap.Error(err))
		return
	}
	since, err := h.s.store.LastSeq(ctx, id)
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
		_ = h.s.store.MachineSeen(ctx, id, h.s.opts.Now(), info.GetVersion())
	}
	acct := newDaemonAccount(h.s.opts.ActivityLimits, since, h.s.opts.Now)
	// Stored even when the collector is being cancelled (a replaced
	// tunnel, a hub shutting down): a record received is not dropped.
	storeCtx := context.WithoutCancel(ctx)
	defer func() {
		if note := acct.droppedNote(); note != nil {
			h.storeHub(storeCtx, m.OrgID, id, note)
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
			h.s.fleet.Drain(id)
		}
		notes, keep := acct.admit(r)
		for _, n := range notes {
			h.storeHub(storeCtx, m.OrgID, id, n)
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
		err = h.s.store.AppendActivity(sctx, id, []store.Activity{{Seq: r.GetSeq(), Time: r.GetTime().AsTime(), Record: b, Source: store.SourceDaemon}})
		cancel()
		if err != nil {
			log.Warn("activity: store", machine, zap.Error(err))
			continue
		}
		h.notify()
		h.s.fleet.ActivityStored()
	}
}

// Watch replays the caller's org's stored activity and follows it live.
func (h *activityHub) Watch(req *hubv1.WatchRequest, stream hubv1.ActivityService_WatchServer) error {
	ctx := stream.Context()
	if _, ok := callerFrom(ctx); !ok {
		return status.Error(codes.Unauthenticated, "no caller")
	}
	_, org, err := (&adminService{s: h.s}).org(ctx, req.GetOrg())
	if err != nil {
		return err
	}
	names := map[string]string{}
	if id := req.GetMachineId(); id != "" {
		m, err := h.s.store.Machine(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && m.OrgID != org.ID) {
			return status.Errorf(codes.NotFound, "machine %s not found in org %s", id, org.Name)
		}
		if err != nil {
			return storeError(err, "machine "+id)
		}
		names[id] = m.Name
	}
	q, err := h.replayQuery(ctx, org.ID, req)
	if err != nil {
		return err
	}
	for {
		h.mu.Lock()
		changed := h.changed
		h.mu.Unlock()
		recs, err := h.s.store.ListActivity(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return storeError(err, "activity")
		}
		for _, a := range recs {
			rec := &agentdv1.ActivityRecord{}
			if err := protojson.Unmarshal(a.Record, rec); err != nil {
				continue
			}
			if a.Source == store.SourceDaemon && rec.Actor != "" {
				// Stored before the hub kept the daemon's actor as its
				// claim: the hub authenticated nobody here.
				if rec.ClaimedActor == "" {
					rec.ClaimedActor = rec.Actor
				}
				rec.Actor, rec.Client = "", ""
			}
			name, ok := names[a.Subject]
			if !ok {
				if m, err := h.s.store.Machine(ctx, a.Subject); err == nil {
					name = m.Name
				}
				names[a.Subject] = name
			}
			if err := stream.Send(&hubv1.WatchResponse{Id: a.ID, MachineId: a.Subject, MachineName: name, Record: rec, Source: a.Source}); err != nil {
				return nil
			}
			q.AfterID = a.ID
		}
		q.Newest, q.Limit = false, store.MaxActivityLimit
		if len(recs) == store.MaxActivityLimit {
			continue // more stored already
		}
		if req.GetNoFollow() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// defaultWatchTail is how many stored records Watch replays first when the
// request names neither since_id nor newest.
const defaultWatchTail = 20

// replayQuery is the first query of a Watch: the newest `newest` records
// after since_id (0: none, so it starts after the newest stored one), or
// without newest, the newest 20 (or the deprecated tail) when since_id is
// 0, else every record after since_id.
func (h *activityHub) replayQuery(ctx context.Context, org string, req *hubv1.WatchRequest) (store.ActivityQuery, error) {
	q := store.ActivityQuery{OrgID: org, MachineID: req.GetMachineId(), AfterID: req.GetSinceId(), Limit: store.MaxActivityLimit}
	switch {
	case req.Newest != nil && req.GetNewest() == 0:
		last, err := h.s.store.ListActivity(ctx, store.ActivityQuery{OrgID: org, MachineID: q.MachineID, AfterID: q.AfterID, Limit: 1, Newest: true})
		if err != nil {
			return q, storeError(err, "activity")
		}
		if len(last) > 0 {
			q.AfterID = last[0].ID
		}
	case req.Newest != nil:
		q.Newest, q.Limit = true, int(min(req.GetNewest(), store.MaxActivityLimit))
	case q.AfterID == 0:
		//lint:ignore SA1019 the deprecated field, still honoured for older clients
		q.Newest, q.Limit = true, int(req.GetTail())
		if q.Limit <= 0 {
			q.Limit = defaultWatchTail
		}
		q.Limit = min(q.Limit, store.MaxActivityLimit)
	}
	return q, nil
}
