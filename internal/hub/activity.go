package hub

import (
	"context"
	"errors"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// activityService serves the org's stored activity to its watchers; the
// records are made and stored by the hub's activitylog.Recorder.
type activityService struct {
	hubv1.UnimplementedActivityServiceServer
	s *Server
}

// Watch replays the caller's org's stored activity and follows it live.
func (h *activityService) Watch(req *hubv1.WatchRequest, stream hubv1.ActivityService_WatchServer) error {
	ctx := stream.Context()
	if _, ok := callerFrom(ctx); !ok {
		return errs.New(errs.Unauthenticated, "no caller")
	}
	_, org, err := (&adminService{s: h.s}).org(ctx, req.GetOrg())
	if err != nil {
		return err
	}
	names := map[string]string{}
	if id := req.GetMachineId(); id != "" {
		m, err := h.s.store.Machine(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && m.OrgID != org.ID) {
			return errs.New(errs.NotFound, "machine %s not found in org %s", id, org.Name)
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
		changed := h.s.activity.Changed()
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
func (h *activityService) replayQuery(ctx context.Context, org string, req *hubv1.WatchRequest) (store.ActivityQuery, error) {
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
