package hub

import (
	"context"
	"errors"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ChangeSandboxEgress changes a running sandbox's allow list (admins).
func (v *environmentService) ChangeSandboxEgress(ctx context.Context, req *hubv1.ChangeSandboxEgressRequest) (*hubv1.ChangeSandboxEgressResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err == nil {
		err = needAdmin(c)
	}
	m, merr := v.sandboxes()
	if err != nil || merr != nil {
		return nil, errors.Join(err, merr)
	}
	ch, err := m.ChangeEgress(ctx, org, c.token.Name, req.GetId(), req.GetAllow(), req.GetDeny(), req.GetCut())
	return &hubv1.ChangeSandboxEgressResponse{Egress: egressProto(ch.Egress), Added: ch.Added, Removed: ch.Removed, Closed: int32(ch.Closed)}, err
}

// SetEnvironmentAllow sets the list of an environment's new sandboxes.
func (v *environmentService) SetEnvironmentAllow(ctx context.Context, req *hubv1.SetEnvironmentAllowRequest) (*hubv1.SetEnvironmentAllowResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err == nil {
		err = needAdmin(c)
	}
	m, merr := v.sandboxes()
	if err != nil || merr != nil {
		return nil, errors.Join(err, merr)
	}
	if err := m.SetEnvironmentAllow(ctx, org, c.token.Name, req.GetName(), req.GetAllow()); err != nil {
		return nil, err
	}
	resp, err := v.GetEnvironment(ctx, &hubv1.GetEnvironmentRequest{Name: req.GetName(), Org: req.GetOrg()})
	return &hubv1.SetEnvironmentAllowResponse{Environment: resp.GetEnvironment()}, err
}

func egressProto(e sandboxes.Egress) *hubv1.SandboxEgress {
	return &hubv1.SandboxEgress{Allow: e.Allow, Generation: e.Gen, CutGeneration: e.CutGen, Changed: timestamppb.New(e.ChangedAt)}
}
