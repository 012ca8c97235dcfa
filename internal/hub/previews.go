package hub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/preview"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/units"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Kinds of the hub's records of previews.
const (
	kindExpose     = "port.expose"
	kindUnexpose   = "port.unexpose"
	kindPreviewHit = "preview.connection"
)

// defaultExposeTTL is how long a preview URL works unless --ttl says.
const defaultExposeTTL = 24 * time.Hour

// newPreview builds the preview server of the hub (served by ServePreview,
// and by Handler for the preview domain's hosts).
func (s *Server) newPreview() (*preview.Server, error) {
	return preview.New(preview.Options{
		DomainURL: s.opts.PreviewDomainURL,
		ListenURL: s.opts.PreviewURL,
		PublicURL: s.opts.PublicURL,
		Store:     s.store,
		Dial:      s.previewUpstream,
		Identify:  preview.Identify(s.store, console.CookieNames(), s.opts.Now),
		Strip:     console.CookieNames(),
		Now:       s.opts.Now,
		Logger:    s.log.Named("preview"),
		Record: func(e store.Exposure, c preview.ConnRecord) {
			s.activity.Record(s.life.ctx, e.OrgID, e.MachineID, &agentdv1.ActivityRecord{
				Actor: "preview", Kind: kindPreviewHit, ObjectId: e.ID, Bytes: c.In + c.Out, Duration: durationpb.New(c.Duration),
				Outcome: agentdv1.Outcome_OUTCOME_OK,
				Summary: fmt.Sprintf("preview %s of port %d: client %s, %s in, %s out, %d requests, %s", e.ID, e.Port, c.Client,
					units.Bytes(c.In), units.Bytes(c.Out), c.Exposures, c.Duration.Round(time.Millisecond))})
		},
	})
}

// ServePreview serves the preview server on lis (TLS with tlsConfig)
// until ctx ends: the listener of agenthub serve --preview-listen.
func (s *Server) ServePreview(ctx context.Context, lis net.Listener, tlsConfig *tls.Config) error {
	return s.preview.Serve(ctx, lis, tlsConfig)
}

// previewUpstream is the route to a machine's agentd for the preview
// server: its tunnel here, or on the replica that holds it.
func (s *Server) previewUpstream(ctx context.Context, id string) (preview.Upstream, error) {
	md := metadata.Pairs(wire.MDActor, "preview")
	if s.sandboxes != nil && isSandboxID(id) {
		// A paused or stopped sandbox: the visit wakes it, as a call does.
		if sb, err := s.opts.Store.Sandbox(ctx, id); err == nil {
			if _, err := s.sandboxes.Wake(ctx, store.Org{ID: sb.OrgID}, id); err != nil {
				return preview.Upstream{}, err
			}
		}
	}
	if cc, ok := s.fleet.Get(id); ok {
		up := preview.Upstream{Conn: cc, MD: md}
		if s.sandboxes != nil && isSandboxID(id) {
			done := s.sandboxes.Enter(ctx, id)
			up.Done = func() { _ = done(nil) }
		}
		return up, nil
	}
	r, remote, err := s.fleet.RouteRemote(ctx, id, md)
	if err != nil {
		return preview.Upstream{}, err
	}
	if !remote {
		return preview.Upstream{}, preview.ErrOffline
	}
	return preview.Upstream{Conn: r.Conn, MD: r.MD}, nil
}

// previewService serves hubv1.PreviewService.
type previewService struct {
	hubv1.UnimplementedPreviewServiceServer
	s *Server
}

var _ hubv1.PreviewServiceServer = (*previewService)(nil)

// target is the machine or sandbox a PreviewService call names, as an
// agentd.v1 call's route finds it (without needing its tunnel).
func (p *previewService) target(ctx context.Context) (*caller, string, error) {
	s := p.s
	c, ok := callerFrom(ctx)
	if !ok {
		return nil, "", errs.New(errs.Unauthenticated, "no caller")
	}
	t, err := targetOf(ctx)
	if err != nil {
		return nil, "", err
	}
	id := t.machine
	if id == "" {
		if id, err = s.routeEnvironment(ctx, c.org, t.env, t.conv); err != nil {
			return nil, "", err
		}
	}
	m, err := s.store.Machine(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && m.OrgID != c.org.ID):
		return nil, "", errs.New(errs.NotFound, "machine %s not found in org %s; list machines with 'agentctl machines'", id, c.org.Name)
	case err != nil:
		return nil, "", errs.New(errs.Unavailable, "machine lookup: %v", err)
	case !m.RevokedAt.IsZero():
		return nil, "", errs.New(errs.Precondition, "machine %s was removed from org %s", id, c.org.Name)
	}
	if err := s.sandboxAccess(ctx, c, id); err != nil {
		return nil, "", err
	}
	return c, id, nil
}

func exposureProto(e store.Exposure) *hubv1.Exposure {
	x := &hubv1.Exposure{Id: e.ID, MachineId: e.MachineID, Port: uint32(e.Port), Access: e.Access, CreatedBy: e.CreatedName,
		CreatedAt: timestamppb.New(e.CreatedAt)}
	if !e.ExpiresAt.IsZero() {
		x.ExpiresAt = timestamppb.New(e.ExpiresAt)
	}
	return x
}

// Expose makes a preview URL for a port of the call's target.
func (p *previewService) Expose(ctx context.Context, req *hubv1.ExposeRequest) (*hubv1.ExposeResponse, error) {
	s := p.s
	if s.opts.PreviewURL == "" && s.opts.PreviewDomainURL == "" {
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
	c, id, err := p.target(ctx)
	if err != nil {
		return nil, err
	}
	token := preview.NewToken()
	now := s.opts.Now()
	e := store.Exposure{OrgID: c.org.ID, MachineID: id, Port: int(req.GetPort()), Access: access, TokenHash: store.HashToken(token),
		CreatedBy: c.token.ID, CreatedName: c.token.Name, CreatedAt: now}
	if ttl > 0 {
		e.ExpiresAt = now.Add(ttl)
	}
	if e, err = s.store.CreateExposure(ctx, e); err != nil {
		return nil, errs.New(errs.Unavailable, "store the exposure: %v", err)
	}
	until := "until unexposed"
	if !e.ExpiresAt.IsZero() {
		until = "until " + e.ExpiresAt.Format(time.RFC3339)
	}
	s.activity.Record(ctx, c.org.ID, id, &agentdv1.ActivityRecord{Actor: c.token.Name, Kind: kindExpose, ObjectId: e.ID,
		Outcome: agentdv1.Outcome_OUTCOME_OK, Summary: fmt.Sprintf("exposed port %d as %s (%s access, %s)", e.Port, e.ID, access, until)})
	return &hubv1.ExposeResponse{Exposure: exposureProto(e), Url: s.preview.URL(token)}, nil
}

// Unexpose ends the exposures of a port of the call's target, or the one
// a URL names.
func (p *previewService) Unexpose(ctx context.Context, req *hubv1.UnexposeRequest) (*hubv1.UnexposeResponse, error) {
	s := p.s
	now := s.opts.Now()
	var (
		c     *caller
		id    string
		found []store.Exposure
		err   error
	)
	switch {
	case req.GetUrl() != "" && req.GetPort() != 0:
		return nil, errs.New(errs.Invalid, "name a port or a URL, not both")
	case req.GetUrl() != "":
		token := s.preview.TokenOf(req.GetUrl())
		if token == "" {
			return nil, errs.New(errs.Invalid, "%q is not a preview URL (https://TOKEN.DOMAIN/ or …/p/TOKEN/)", req.GetUrl())
		}
		var okc bool
		if c, okc = callerFrom(ctx); !okc {
			return nil, errs.New(errs.Unauthenticated, "no caller")
		}
		e, err := s.store.ExposureByToken(ctx, store.HashToken(token), now)
		if errors.Is(err, store.ErrNotFound) || (err == nil && e.OrgID != c.org.ID) {
			return nil, errs.New(errs.NotFound, "no live exposure has that URL (unexposed, expired, or another org's)")
		}
		if err != nil {
			return nil, errs.New(errs.Unavailable, "exposure lookup: %v", err)
		}
		if err := s.sandboxAccess(ctx, c, e.MachineID); err != nil {
			return nil, err
		}
		found, id = []store.Exposure{e}, e.MachineID
	case req.GetPort() >= 1 && req.GetPort() <= 65535:
		if c, id, err = p.target(ctx); err != nil {
			return nil, err
		}
		all, err := s.store.ListExposures(ctx, c.org.ID, id, now)
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
		if err := s.unexpose(ctx, c, e, ""); err != nil {
			return nil, err
		}
		resp.Ids = append(resp.Ids, e.ID)
	}
	return resp, nil
}

// unexpose revokes e (gone meanwhile is fine) and records who did, how.
func (s *Server) unexpose(ctx context.Context, c *caller, e store.Exposure, how string) error {
	if err := s.store.RevokeExposure(ctx, c.org.ID, e.ID, s.opts.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.Unavailable, "unexpose %s: %v", e.ID, err)
	}
	s.activity.Record(ctx, c.org.ID, e.MachineID, &agentdv1.ActivityRecord{Actor: c.token.Name, Kind: kindUnexpose, ObjectId: e.ID,
		Outcome: agentdv1.Outcome_OUTCOME_OK, Summary: fmt.Sprintf("unexposed port %d (%s)%s", e.Port, e.ID, how)})
	return nil
}

// ListExposures lists the call's target's live exposures.
func (p *previewService) ListExposures(ctx context.Context, _ *hubv1.ListExposuresRequest) (*hubv1.ListExposuresResponse, error) {
	c, id, err := p.target(ctx)
	if err != nil {
		return nil, err
	}
	all, err := p.s.store.ListExposures(ctx, c.org.ID, id, p.s.opts.Now())
	if err != nil {
		return nil, errs.New(errs.Unavailable, "list exposures: %v", err)
	}
	resp := &hubv1.ListExposuresResponse{}
	for _, e := range all {
		resp.Exposures = append(resp.Exposures, exposureProto(e))
	}
	return resp, nil
}

// Exposures lists the console caller's org's live previews, of the
// machines and sandboxes the caller may reach.
func (b *consoleBackend) Exposures(ctx context.Context) ([]console.Exposure, error) {
	s := b.s
	c, ok := callerFrom(ctx)
	if !ok {
		return nil, errs.New(errs.Unauthenticated, "no caller")
	}
	all, err := s.store.ListExposures(ctx, c.org.ID, "", s.opts.Now())
	if err != nil {
		return nil, errs.New(errs.Unavailable, "list exposures: %v", err)
	}
	names := map[string]string{}
	var out []console.Exposure
	for _, e := range all {
		if s.sandboxAccess(ctx, c, e.MachineID) != nil {
			continue
		}
		name, ok := names[e.MachineID]
		if !ok {
			name = e.MachineID
			if m, err := s.store.Machine(ctx, e.MachineID); err == nil && !isSandboxID(e.MachineID) && m.Name != "" {
				name = m.Name
			}
			names[e.MachineID] = name
		}
		out = append(out, console.Exposure{ID: e.ID, Target: e.MachineID, TargetName: name, Port: e.Port, Access: e.Access,
			CreatedBy: e.CreatedName, Created: e.CreatedAt, Expires: e.ExpiresAt})
	}
	return out, nil
}

// Unexpose revokes one of the console caller's org's live previews, as
// agentctl port unexpose URL does.
func (b *consoleBackend) Unexpose(ctx context.Context, id string) error {
	s := b.s
	c, ok := callerFrom(ctx)
	if !ok {
		return errs.New(errs.Unauthenticated, "no caller")
	}
	all, err := s.store.ListExposures(ctx, c.org.ID, "", s.opts.Now())
	if err != nil {
		return errs.New(errs.Unavailable, "list exposures: %v", err)
	}
	for _, e := range all {
		if e.ID != id {
			continue
		}
		if err := s.sandboxAccess(ctx, c, e.MachineID); err != nil {
			return err
		}
		return s.unexpose(ctx, c, e, " in the console")
	}
	return errs.New(errs.NotFound, "no live preview %s in org %s (unexposed, or expired)", id, c.org.Name)
}

// tap is the gRPC server's gate: a call whose :authority is a preview's
// host never reaches the API (a preview page must not drive it), then the
// token gate.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	for _, a := range info.Header.Get(":authority") {
		if _, ok := s.preview.HostToken(a); ok {
			return ctx, rpcerr.Status(errs.New(errs.NotFound, "%s is a preview's host, not the hub's API: call the hub at its own address", a))
		}
	}
	return s.gate.tap(ctx, info)
}
