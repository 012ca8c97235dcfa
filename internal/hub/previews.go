package hub

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/conns"
	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/exposures"
	"github.com/devdepot-ai/agentd/internal/hub/fleet"
	"github.com/devdepot-ai/agentd/internal/hub/preview"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
)

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
		ClientAddr: func(r *http.Request) string {
			return conns.ClientAddr(r, s.opts.TrustedProxies)
		},
		Now:    s.opts.Now,
		Logger: s.log.Named("preview"),
		Record: func(e store.Exposure, c preview.ConnRecord) {
			exposures.RecordConn(s.life.ctx, s.activity, e, c)
		},
	})
}

// newExposures builds the PreviewService (and the console's previews),
// after the preview server.
func (s *Server) newExposures() *exposures.Service {
	return exposures.New(exposures.Options{On: s.opts.PreviewURL != "" || s.opts.PreviewDomainURL != "",
		Hub: exposureHub{s}, Store: s.store, URLs: s.preview, Activity: s.activity, Now: s.opts.Now})
}

// exposureHub is what package exposures asks of the hub.
type exposureHub struct{ s *Server }

func (h exposureHub) Caller(ctx context.Context) (exposures.Caller, bool) {
	c, ok := callerFrom(ctx)
	if !ok {
		return exposures.Caller{}, false
	}
	return exposures.Caller{Org: c.org, Token: c.token}, true
}

func (h exposureHub) Route(ctx context.Context, org store.Org) (string, error) {
	t, err := targetOf(ctx)
	if err != nil || t.machine != "" {
		return t.machine, err
	}
	return h.s.routeEnvironment(ctx, org, t.env, t.conv)
}

func (h exposureHub) Access(ctx context.Context, id string) error {
	c, ok := callerFrom(ctx)
	if !ok {
		return errs.New(errs.Unauthenticated, "no caller")
	}
	return h.s.sandboxAccess(ctx, c, id)
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
		} else if !isSandboxID(id) {
			// A machine dials the hub's public port for its byte stream
			// (a sandbox's socket serves tunnels only).
			up.Stream = func() fleet.StreamOffer { return s.fleet.Streams().Offer(id) }
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

// Exposures lists the console caller's org's live previews, of the
// machines and sandboxes the caller may reach.
func (b *consoleBackend) Exposures(ctx context.Context) ([]console.Exposure, error) {
	live, err := b.exposures.Live(ctx)
	if err != nil {
		return nil, err
	}
	var out []console.Exposure
	for _, e := range live {
		out = append(out, console.Exposure{ID: e.ID, Target: e.MachineID, TargetName: e.TargetName, Port: e.Port, Access: e.Access,
			CreatedBy: e.CreatedName, Created: e.CreatedAt, Expires: e.ExpiresAt})
	}
	return out, nil
}

// Unexpose revokes one of the console caller's org's live previews, as
// agentctl port unexpose URL does.
func (b *consoleBackend) Unexpose(ctx context.Context, id string) error {
	return b.exposures.Revoke(ctx, id)
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
