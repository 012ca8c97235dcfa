package exposures

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/preview"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Expose makes a preview URL for a port of the call's target.
func (x *Service) Expose(ctx context.Context, req *hubv1.ExposeRequest) (*hubv1.ExposeResponse, error) {
	if !x.o.On {
		return nil, errs.New(errs.Precondition, "previews are off on this hub: start it with agenthub serve --preview-domain DOMAIN (a name of its own per preview, wildcard DNS and certificate) or --preview-listen ADDR (a listener of their own): previews never share the console's origin")
	}
	if req.GetPort() < 1 || req.GetPort() > 65535 {
		return nil, errs.New(errs.Invalid, "port %d: want 1-65535 (the preview serves 127.0.0.1:PORT on the target)", req.GetPort())
	}
	access := req.GetAccess()
	if access == "" {
		access = store.AccessPrivate
	}
	if access != store.AccessPrivate && access != store.AccessOrg && access != store.AccessPublic {
		return nil, errs.New(errs.Invalid, "access %q: want private, org or public", access)
	}
	ttl := defaultExposeTTL
	if req.Ttl != nil {
		if err := req.GetTtl().CheckValid(); err != nil || req.GetTtl().AsDuration() < 0 {
			return nil, errs.New(errs.Invalid, "ttl %v: want a duration of 0 (until unexposed) or more", req.GetTtl().AsDuration())
		}
		ttl = req.GetTtl().AsDuration()
	}
	c, id, err := x.target(ctx)
	if err != nil {
		return nil, err
	}
	token := preview.NewToken()
	now := x.o.Now()
	e := store.Exposure{OrgID: c.Org.ID, MachineID: id, Port: int(req.GetPort()), Access: access, TokenHash: store.HashToken(token),
		CreatedBy: c.Token.ID, CreatedName: c.Token.Name, CreatedAt: now}
	if ttl > 0 {
		e.ExpiresAt = now.Add(ttl)
	}
	if e, err = x.o.Store.CreateExposure(ctx, e); err != nil {
		return nil, errs.New(errs.Unavailable, "store the exposure: %v", err)
	}
	until := "until unexposed"
	if !e.ExpiresAt.IsZero() {
		until = "until " + e.ExpiresAt.Format(time.RFC3339)
	}
	x.o.Activity.Record(ctx, c.Org.ID, id, &agentdv1.ActivityRecord{Actor: c.Token.Name, Kind: kindExpose, ObjectId: e.ID,
		Outcome: agentdv1.Outcome_OUTCOME_OK, Summary: fmt.Sprintf("exposed port %d as %s (%s access, %s)", e.Port, e.ID, access, until)})
	return &hubv1.ExposeResponse{Exposure: exposureProto(e), Url: x.o.URLs.URL(token)}, nil
}

// Unexpose ends the exposures of a port of the call's target, or the one
// a URL names.
func (x *Service) Unexpose(ctx context.Context, req *hubv1.UnexposeRequest) (*hubv1.UnexposeResponse, error) {
	now := x.o.Now()
	var (
		c     Caller
		id    string
		found []store.Exposure
		err   error
	)
	switch {
	case req.GetUrl() != "" && req.GetPort() != 0:
		return nil, errs.New(errs.Invalid, "name a port or a URL, not both")
	case req.GetUrl() != "":
		token := x.o.URLs.TokenOf(req.GetUrl())
		if token == "" {
			return nil, errs.New(errs.Invalid, "%q is not a preview URL (https://TOKEN.DOMAIN/ or …/p/TOKEN/)", req.GetUrl())
		}
		if c, err = x.caller(ctx); err != nil {
			return nil, err
		}
		e, err := x.o.Store.ExposureByToken(ctx, store.HashToken(token), now)
		if errors.Is(err, store.ErrNotFound) || (err == nil && e.OrgID != c.Org.ID) {
			return nil, errs.New(errs.NotFound, "no live exposure has that URL (unexposed, expired, or another org's)")
		}
		if err != nil {
			return nil, errs.New(errs.Unavailable, "exposure lookup: %v", err)
		}
		if err := x.o.Hub.Access(ctx, e.MachineID); err != nil {
			return nil, err
		}
		found = []store.Exposure{e}
	case req.GetPort() >= 1 && req.GetPort() <= 65535:
		if c, id, err = x.target(ctx); err != nil {
			return nil, err
		}
		all, err := x.o.Store.ListExposures(ctx, c.Org.ID, id, now)
		if err != nil {
			return nil, errs.New(errs.Unavailable, "list exposures: %v", err)
		}
		for _, e := range all {
			if e.Port == int(req.GetPort()) {
				found = append(found, e)
			}
		}
		if len(found) == 0 {
			return nil, errs.New(errs.NotFound, "port %d of %s is not exposed; see agentctl port ls", req.GetPort(), id)
		}
	default:
		return nil, errs.New(errs.Invalid, "name a port (1-65535) or a preview URL")
	}
	resp := &hubv1.UnexposeResponse{}
	for _, e := range found {
		if err := x.unexpose(ctx, c, e, ""); err != nil {
			return nil, err
		}
		resp.Ids = append(resp.Ids, e.ID)
	}
	return resp, nil
}

// unexpose revokes e (gone meanwhile is fine) and records who did, how.
func (x *Service) unexpose(ctx context.Context, c Caller, e store.Exposure, how string) error {
	if err := x.o.Store.RevokeExposure(ctx, c.Org.ID, e.ID, x.o.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.Unavailable, "unexpose %s: %v", e.ID, err)
	}
	x.o.Activity.Record(ctx, c.Org.ID, e.MachineID, &agentdv1.ActivityRecord{Actor: c.Token.Name, Kind: kindUnexpose, ObjectId: e.ID,
		Outcome: agentdv1.Outcome_OUTCOME_OK, Summary: fmt.Sprintf("unexposed port %d (%s)%s", e.Port, e.ID, how)})
	return nil
}

// ListExposures lists the call's target's live exposures.
func (x *Service) ListExposures(ctx context.Context, _ *hubv1.ListExposuresRequest) (*hubv1.ListExposuresResponse, error) {
	c, id, err := x.target(ctx)
	if err != nil {
		return nil, err
	}
	all, err := x.o.Store.ListExposures(ctx, c.Org.ID, id, x.o.Now())
	if err != nil {
		return nil, errs.New(errs.Unavailable, "list exposures: %v", err)
	}
	resp := &hubv1.ListExposuresResponse{}
	for _, e := range all {
		resp.Exposures = append(resp.Exposures, exposureProto(e))
	}
	return resp, nil
}

// Named is a live exposure and the name of its target: the machine's
// name, or the sandbox's ID for a sandbox.
type Named struct {
	store.Exposure
	TargetName string
}

// Live lists the caller's org's live exposures, of the machines and
// sandboxes the caller may reach (the console's previews).
func (x *Service) Live(ctx context.Context) ([]Named, error) {
	c, err := x.caller(ctx)
	if err != nil {
		return nil, err
	}
	all, err := x.o.Store.ListExposures(ctx, c.Org.ID, "", x.o.Now())
	if err != nil {
		return nil, errs.New(errs.Unavailable, "list exposures: %v", err)
	}
	names := map[string]string{}
	var out []Named
	for _, e := range all {
		if x.o.Hub.Access(ctx, e.MachineID) != nil {
			continue
		}
		name, ok := names[e.MachineID]
		if !ok {
			name = e.MachineID
			if m, err := x.o.Store.Machine(ctx, e.MachineID); err == nil && !sandboxes.IsID(e.MachineID) && m.Name != "" {
				name = m.Name
			}
			names[e.MachineID] = name
		}
		out = append(out, Named{Exposure: e, TargetName: name})
	}
	return out, nil
}

// Revoke ends one of the caller's org's live exposures by ID, as
// agentctl port unexpose URL does (the console's revoke).
func (x *Service) Revoke(ctx context.Context, id string) error {
	c, err := x.caller(ctx)
	if err != nil {
		return err
	}
	all, err := x.o.Store.ListExposures(ctx, c.Org.ID, "", x.o.Now())
	if err != nil {
		return errs.New(errs.Unavailable, "list exposures: %v", err)
	}
	for _, e := range all {
		if e.ID != id {
			continue
		}
		if err := x.o.Hub.Access(ctx, e.MachineID); err != nil {
			return err
		}
		return x.unexpose(ctx, c, e, " in the console")
	}
	return errs.New(errs.NotFound, "no live preview %s in org %s (unexposed, or expired)", id, c.Org.Name)
}
