package hub

import (
	"context"
	"errors"

	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// maxAllowPrivate bounds an environment's private destinations.
const maxAllowPrivate = 64

// withAllowPrivate fills in a custom environment's private destinations
// (left empty when they cannot be read: env show is not refused for it).
func (v *environmentService) withAllowPrivate(ctx context.Context, orgID string, p *hubv1.Environment) *hubv1.Environment {
	if l, err := v.s.store.EnvironmentAllowPrivate(ctx, orgID, p.GetName()); err == nil {
		p.AllowPrivate = l
	}
	return p
}

func (v *environmentService) SetEnvironmentAllowPrivate(ctx context.Context, req *hubv1.SetEnvironmentAllowPrivateRequest) (*hubv1.SetEnvironmentAllowPrivateResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	name := req.GetName()
	if name == BuiltinEnvironment {
		return nil, errs.New(errs.Invalid, "the built-in environment takes the hub's private destinations only (agenthub serve --egress-allow-private)")
	}
	if len(req.GetAllowPrivate()) > maxAllowPrivate {
		return nil, errs.New(errs.Invalid, "--allow-private: %d entries; at most %d", len(req.GetAllowPrivate()), maxAllowPrivate)
	}
	a, err := egressproxy.ParsePrivateAllow(req.GetAllowPrivate())
	if err != nil {
		return nil, errs.New(errs.Invalid, "--allow-private: %v", err)
	}
	e, err := v.s.store.Environment(ctx, org.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.New(errs.NotFound, "environment %s not found in org %s; list them with 'agentctl env ls'", truncateRunes(name, 80), org.Name)
	}
	if err != nil {
		return nil, storeError(err, "environment "+name)
	}
	if err := v.s.store.SetEnvironmentAllowPrivate(ctx, org.ID, name, a.Strings(), v.s.opts.Now()); err != nil {
		return nil, storeError(err, "environment "+name)
	}
	def, err := v.s.defaultEnv(ctx, org)
	if err != nil {
		return nil, err
	}
	e, err = v.s.store.Environment(ctx, org.ID, name)
	if err != nil {
		return nil, storeError(err, "environment "+name)
	}
	return &hubv1.SetEnvironmentAllowPrivateResponse{Environment: v.withAllowPrivate(ctx, org.ID, v.withPolicy(ctx, org.ID, v.environmentProto(e, def)))}, nil
}
