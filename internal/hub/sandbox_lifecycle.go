package hub

import (
	"context"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// ChangeSandboxState pauses, resumes, stops, starts, archives or restores
// one of the org's sandboxes. Pause, stop and archive are admins' (they
// hold up or end the processes of someone's conversation); resume, start
// and restore are anyone's who may call the sandbox, as a call resumes it
// anyway.
func (v *environmentService) ChangeSandboxState(ctx context.Context, req *hubv1.ChangeSandboxStateRequest) (*hubv1.ChangeSandboxStateResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	m, err := v.sandboxes()
	if err != nil {
		return nil, err
	}
	switch req.GetAction() {
	case sandboxes.ActionPause, sandboxes.ActionStop, sandboxes.ActionArchive:
		if err := needAdmin(c); err != nil {
			return nil, err
		}
	case sandboxes.ActionResume, sandboxes.ActionStart, sandboxes.ActionRestore:
		if err := v.s.sandboxAccess(ctx, c, req.GetId()); err != nil {
			return nil, err
		}
	default:
		return nil, errs.New(errs.Invalid, "sandbox action %q: want pause, resume, stop, start, archive or restore", truncateRunes(req.GetAction(), 40))
	}
	res, err := m.Transition(ctx, org, req.GetId(), req.GetAction())
	if err != nil {
		return nil, err
	}
	return &hubv1.ChangeSandboxStateResponse{From: res.From, To: res.To, TookMs: res.Took.Milliseconds()}, nil
}

// SetEnvironmentPolicy sets an environment's own lifecycle policy (admins).
func (v *environmentService) SetEnvironmentPolicy(ctx context.Context, req *hubv1.SetEnvironmentPolicyRequest) (*hubv1.SetEnvironmentPolicyResponse, error) {
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
	name := req.GetName()
	if name != BuiltinEnvironment {
		if _, err := v.s.store.Environment(ctx, org.ID, name); err != nil {
			return nil, storeError(err, "environment "+truncateRunes(name, 80)+" (a sandbox environment: builtin or a custom image)")
		}
	}
	if req.PauseAfter == nil && req.StopAfter == nil && req.ArchiveAfter == nil && req.DeleteAfter == nil {
		return nil, errs.New(errs.Invalid, "nothing to set: give a pause after, stop after, archive after or delete after")
	}
	if err := m.SetPolicy(ctx, org.ID, name, req.PauseAfter, req.StopAfter, req.ArchiveAfter, req.DeleteAfter); err != nil {
		return nil, err
	}
	resp, err := v.GetEnvironment(ctx, &hubv1.GetEnvironmentRequest{Name: name, Org: req.GetOrg()})
	if err != nil {
		return nil, err
	}
	return &hubv1.SetEnvironmentPolicyResponse{Environment: resp.GetEnvironment()}, nil
}

// withPolicy fills in a sandbox environment's lifecycle policy.
func (v *environmentService) withPolicy(ctx context.Context, orgID string, e *hubv1.Environment) *hubv1.Environment {
	if v.s.sandboxes == nil || e.GetKind() == hubv1.EnvironmentKind_ENVIRONMENT_KIND_MACHINE {
		return e
	}
	e.PauseAfter, e.StopAfter, e.ArchiveAfter, e.DeleteAfter = v.s.sandboxes.PolicyText(ctx, orgID, e.GetName())
	e.Allow, _ = v.s.sandboxes.EnvironmentAllow(ctx, orgID, e.GetName()) // shown as none when unreadable
	return e
}
