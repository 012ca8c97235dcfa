package hub

import (
	"context"
	"errors"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// ForkSandbox copies one of the org's sandboxes into new ones. Admins
// only, as pause is: the source is paused while its workspace is copied
// (on Kubernetes, its bounded workspace frozen).
func (v *environmentService) ForkSandbox(ctx context.Context, req *hubv1.ForkSandboxRequest) (*hubv1.ForkSandboxResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if err := needAdmin(c); err != nil {
		return nil, err
	}
	m, err := v.sandboxes()
	if err != nil {
		return nil, err
	}
	n := int(req.GetCount())
	if req.GetCount() == 0 {
		n = 1
	}
	ids, err := m.Fork(ctx, org, req.GetId(), n, req.GetConversation())
	if err != nil {
		return nil, err
	}
	return &hubv1.ForkSandboxResponse{Ids: ids}, nil
}

// CreateSandbox gets or makes the conversation's sandbox, as a call for
// them would (whoever may call the environment may create it).
func (v *environmentService) CreateSandbox(ctx context.Context, req *hubv1.CreateSandboxRequest) (*hubv1.CreateSandboxResponse, error) {
	_, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	if _, err := v.sandboxes(); err != nil {
		return nil, err
	}
	conv := req.GetConversation()
	if conv == "" {
		return nil, errs.New(errs.Invalid, "a sandbox serves a conversation: give its id (--conversation)")
	}
	env := req.GetEnvironment()
	if env == "" {
		if env, err = v.s.defaultEnv(ctx, org); err != nil {
			return nil, err
		}
	}
	_, err = v.s.store.ConversationSandbox(ctx, org.ID, env, conv)
	created := errors.Is(err, store.ErrNotFound)
	id, err := v.s.routeEnvironment(ctx, org, env, conv)
	if err != nil {
		return nil, err
	}
	if !isSandboxID(id) {
		return nil, errs.New(errs.Invalid, "environment %s is a paired machine, not a sandbox environment", truncateRunes(env, 80))
	}
	list, err := v.ListSandboxes(ctx, &hubv1.ListSandboxesRequest{Org: req.GetOrg(), Environment: env})
	if err != nil {
		return nil, err
	}
	for _, sb := range list.GetSandboxes() {
		if sb.GetId() == id {
			return &hubv1.CreateSandboxResponse{Sandbox: sb, Created: created}, nil
		}
	}
	return &hubv1.CreateSandboxResponse{Sandbox: &hubv1.Sandbox{Id: id, Environment: env, Conversation: conv}, Created: created}, nil
}
