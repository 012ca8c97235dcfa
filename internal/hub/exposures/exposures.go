package exposures

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/preview"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/units"
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

// Caller is who made a call: its org and API token.
type Caller struct {
	Org   store.Org
	Token store.Token
}

// Hub is what the service asks of the hub.
type Hub interface {
	// Caller is the call's caller; false when it has none.
	Caller(ctx context.Context) (Caller, bool)
	// Route is the machine or sandbox the call's metadata names in org
	// (a machine, or an environment and conversation, routed as an
	// agentd.v1 call would be, without needing its tunnel).
	Route(ctx context.Context, org store.Org) (string, error)
	// Access is nil when the call's caller may reach the machine or
	// sandbox id of its org.
	Access(ctx context.Context, id string) error
}

// Store is what the service reads and writes.
type Store interface {
	store.Exposures
	Machine(ctx context.Context, id string) (store.Machine, error)
}

// Recorder records activity (the hub's activity log).
type Recorder interface {
	Record(ctx context.Context, orgID, subject string, r *agentdv1.ActivityRecord)
}

// URLs are the preview server's URLs (a *preview.Server).
type URLs interface {
	// URL is the preview URL of token.
	URL(token string) string
	// TokenOf is the token of a preview URL; "" if it is none.
	TokenOf(url string) string
}

// Options configure a Service.
type Options struct {
	// On: the hub serves previews (--preview-domain or --preview-listen).
	On       bool
	Hub      Hub
	Store    Store
	URLs     URLs
	Activity Recorder
	Now      func() time.Time
}

// Service serves hubv1.PreviewService, and the console's previews.
type Service struct {
	hubv1.UnimplementedPreviewServiceServer
	o Options
}

var _ hubv1.PreviewServiceServer = (*Service)(nil)

// New returns the service.
func New(o Options) *Service { return &Service{o: o} }

// RecordConn records a client connection the preview server served for
// e (its Options.Record).
func RecordConn(ctx context.Context, r Recorder, e store.Exposure, c preview.ConnRecord) {
	r.Record(ctx, e.OrgID, e.MachineID, &agentdv1.ActivityRecord{
		Actor: "preview", Kind: kindPreviewHit, ObjectId: e.ID, Bytes: c.In + c.Out, Duration: durationpb.New(c.Duration),
		Outcome: agentdv1.Outcome_OUTCOME_OK,
		Summary: fmt.Sprintf("preview %s of port %d: client %s, %s in, %s out, %d requests, %s", e.ID, e.Port, c.Client,
			units.Bytes(c.In), units.Bytes(c.Out), c.Exposures, c.Duration.Round(time.Millisecond))})
}

// caller is the call's caller, or Unauthenticated.
func (x *Service) caller(ctx context.Context) (Caller, error) {
	c, ok := x.o.Hub.Caller(ctx)
	if !ok {
		return Caller{}, errs.New(errs.Unauthenticated, "no caller")
	}
	return c, nil
}

// target is the machine or sandbox a PreviewService call names, as an
// agentd.v1 call's route finds it (without needing its tunnel).
func (x *Service) target(ctx context.Context) (Caller, string, error) {
	c, err := x.caller(ctx)
	if err != nil {
		return Caller{}, "", err
	}
	id, err := x.o.Hub.Route(ctx, c.Org)
	if err != nil {
		return Caller{}, "", err
	}
	m, err := x.o.Store.Machine(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && m.OrgID != c.Org.ID):
		return Caller{}, "", errs.New(errs.NotFound, "machine %s not found in org %s; list machines with 'agentctl machines'", id, c.Org.Name)
	case err != nil:
		return Caller{}, "", errs.New(errs.Unavailable, "machine lookup: %v", err)
	case !m.RevokedAt.IsZero():
		return Caller{}, "", errs.New(errs.Precondition, "machine %s was removed from org %s", id, c.Org.Name)
	}
	if err := x.o.Hub.Access(ctx, id); err != nil {
		return Caller{}, "", err
	}
	return c, id, nil
}

func exposureProto(e store.Exposure) *hubv1.Exposure {
	p := &hubv1.Exposure{Id: e.ID, MachineId: e.MachineID, Port: uint32(e.Port), Access: e.Access, CreatedBy: e.CreatedName,
		CreatedAt: timestamppb.New(e.CreatedAt)}
	if !e.ExpiresAt.IsZero() {
		p.ExpiresAt = timestamppb.New(e.ExpiresAt)
	}
	return p
}
