package hub

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base32"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/preview"
	"github.com/devdepot-ai/agentd/internal/hub/store"
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
	domain, err := previewDomain(s.opts.PreviewDomainURL, s.opts.PublicURL)
	if err != nil {
		return nil, err
	}
	return preview.New(preview.Options{
		Domain:   domain,
		Store:    s.store,
		Dial:     s.previewUpstream,
		Identify: s.previewViewer,
		Strip:    console.CookieNames(),
		Now:      s.opts.Now,
		Logger:   s.log.Named("preview"),
		Record: func(e store.Exposure, c preview.ConnRecord) {
			s.activity.Record(s.life.ctx, e.OrgID, e.MachineID, &agentdv1.ActivityRecord{
				Actor: "preview", Kind: kindPreviewHit, ObjectId: e.ID, Bytes: c.In + c.Out, Duration: durationpb.New(c.Duration),
				Outcome: agentdv1.Outcome_OUTCOME_OK,
				Summary: fmt.Sprintf("preview %s of port %d: client %s, %s in, %s out, %d requests, %s", e.ID, e.Port, c.Client,
					units.Bytes(c.In), units.Bytes(c.Out), c.Exposures, c.Duration.Round(time.Millisecond))})
		},
	}), nil
}

// previewDomain is the preview DOMAIN of Options.PreviewDomainURL ("" when
// unset), which the hub's own host (publicURL's) must not be under: every
// host under it is a preview's.
func previewDomain(domainURL, publicURL string) (string, error) {
	if domainURL == "" {
		return "", nil
	}
	u, err := url.Parse(domainURL)
	if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("hub: preview domain URL %q: want http(s)://DOMAIN[:PORT]", domainURL)
	}
	domain := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if pu, err := url.Parse(publicURL); err == nil && publicURL != "" {
		h := strings.ToLower(strings.TrimSuffix(pu.Hostname(), "."))
		if h == domain || strings.HasSuffix(h, "."+domain) {
			return "", fmt.Errorf("hub: the hub's own host %s is under the preview domain %s: every name there is a preview's, never the console's; use a domain of its own (say preview.%s)", h, domain, h)
		}
	}
	return domain, nil
}

// tap is the gRPC server's gate: a call whose :authority is a preview's
// host never reaches the API (a preview page must not drive it), then the
// token gate.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	for _, a := range info.Header.Get(":authority") {
		if _, ok := s.preview.HostToken(a); ok {
			return ctx, status.Errorf(codes.NotFound, "%s is a preview's host, not the hub's API: call the hub at its own address", a)
		}
	}
	return s.gate.tap(ctx, info)
}

// newPreviewToken is a new exposure's secret: 256 random bits in lower
// case base32, so that it is one DNS label (52 characters) that survives
// a browser's lowering of host names, as well as a path segment.
func newPreviewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// previewURL is the URL of an exposure's token: under the preview domain
// when the hub has one, else on the preview listener.
func (s *Server) previewURL(token string) string {
	if s.opts.PreviewDomainURL != "" {
		u, _ := url.Parse(s.opts.PreviewDomainURL) // checked by New
		host := token + "." + strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if p := u.Port(); p != "" {
			host = net.JoinHostPort(host, p)
		}
		return u.Scheme + "://" + host + "/"
	}
	return strings.TrimSuffix(s.opts.PreviewURL, "/") + preview.PathPrefix + token + "/"
}

// previewToken is the token of a preview URL, either form; "" if u is
// not one.
func (s *Server) previewToken(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if token, ok := s.preview.HostToken(u.Host); ok {
		return token
	}
	rest, ok := strings.CutPrefix(u.Path, preview.PathPrefix)
	if !ok {
		return ""
	}
	token, _, _ := strings.Cut(rest, "/")
	return token
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

// previewViewer is who a preview request is: the API token it carries as
// a bearer, or the console session its cookie names.
func (s *Server) previewViewer(r *http.Request) (preview.Viewer, bool, error) {
	ctx := r.Context()
	byHash := func(h store.TokenHash) (preview.Viewer, bool, error) {
		tok, err := s.store.TokenByHash(ctx, h)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrRevoked) {
			return preview.Viewer{}, false, nil
		}
		if err != nil {
			return preview.Viewer{}, false, err
		}
		return preview.Viewer{TokenID: tok.ID, OrgIDs: []string{tok.OrgID}, Name: tok.Name}, true, nil
	}
	if raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), wire.BearerPrefix); ok {
		h, err := store.ParseToken(strings.TrimSpace(raw))
		if err != nil {
			return preview.Viewer{}, false, nil
		}
		return byHash(h)
	}
	for _, name := range console.CookieNames() {
		ck, err := r.Cookie(name)
		if err != nil || ck.Value == "" {
			continue
		}
		sess, err := s.store.ConsoleSession(ctx, store.HashToken(ck.Value), s.opts.Now())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return preview.Viewer{}, false, err
		}
		if sess.TokenHash != (store.TokenHash{}) {
			return byHash(sess.TokenHash)
		}
		v := preview.Viewer{OrgIDs: []string{sess.OrgID}, Name: sess.Name} // the owner's console link
		if sess.ActingOrgID != "" {
			v.OrgIDs = append(v.OrgIDs, sess.ActingOrgID)
		}
		return v, true, nil
	}
	return preview.Viewer{}, false, nil
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
	token := newPreviewToken()
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
	return &hubv1.ExposeResponse{Exposure: exposureProto(e), Url: s.previewURL(token)}, nil
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
		token := s.previewToken(req.GetUrl())
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
		if err := s.store.RevokeExposure(ctx, c.org.ID, e.ID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, errs.New(errs.Unavailable, "unexpose %s: %v", e.ID, err)
		}
		resp.Ids = append(resp.Ids, e.ID)
		s.activity.Record(ctx, c.org.ID, id, &agentdv1.ActivityRecord{Actor: c.token.Name, Kind: kindUnexpose, ObjectId: e.ID,
			Outcome: agentdv1.Outcome_OUTCOME_OK, Summary: fmt.Sprintf("unexposed port %d (%s)", e.Port, e.ID)})
	}
	return resp, nil
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
	now := s.opts.Now()
	all, err := s.store.ListExposures(ctx, c.org.ID, "", now)
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
		err := s.store.RevokeExposure(ctx, c.org.ID, e.ID, now)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return errs.New(errs.Unavailable, "unexpose %s: %v", e.ID, err)
		}
		s.activity.Record(ctx, c.org.ID, e.MachineID, &agentdv1.ActivityRecord{Actor: c.token.Name, Kind: kindUnexpose, ObjectId: e.ID,
			Outcome: agentdv1.Outcome_OUTCOME_OK, Summary: fmt.Sprintf("unexposed port %d (%s) in the console", e.Port, e.ID)})
		return nil
	}
	return errs.New(errs.NotFound, "no live preview %s in org %s (unexposed, or expired)", id, c.org.Name)
}
