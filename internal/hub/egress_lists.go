package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Activity kinds of changes to allow lists: a running sandbox's (agentctl
// sandbox allow | deny), an environment's (env set --allow).
const (
	kindEgressChange   = "egress.change"
	kindEgressEnvironm = "environment.allow"
)

// ChangeSandboxEgress changes a running sandbox's allow list (admins).
func (v *environmentService) ChangeSandboxEgress(ctx context.Context, req *hubv1.ChangeSandboxEgressRequest) (*hubv1.ChangeSandboxEgressResponse, error) {
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
	if len(req.GetAllow()) == 0 && len(req.GetDeny()) == 0 {
		return nil, errs.New(errs.Invalid, "nothing to change: give destinations to allow or deny")
	}
	if len(req.GetAllow())+len(req.GetDeny()) > 256 {
		return nil, errs.New(errs.Invalid, "%d destinations in one change: at most 256", len(req.GetAllow())+len(req.GetDeny()))
	}
	ch, err := m.ChangeEgress(ctx, org, req.GetId(), req.GetAllow(), req.GetDeny(), req.GetCut())
	if err != nil {
		return nil, err
	}
	if len(ch.Added) > 0 || len(ch.Removed) > 0 || ch.Cut {
		var what []string
		if len(ch.Added) > 0 {
			what = append(what, "allowed "+strings.Join(ch.Added, ", "))
		}
		if len(ch.Removed) > 0 {
			what = append(what, "denied "+strings.Join(ch.Removed, ", "))
		}
		if ch.Cut {
			what = append(what, "cut open connections it no longer allows")
		}
		v.s.recordHub(ctx, org, &agentdv1.ActivityRecord{Actor: c.token.Name, Kind: kindEgressChange, ObjectId: req.GetId(),
			Summary: fmt.Sprintf("changed the allow list of %s to generation %d: %s; now %s", req.GetId(), ch.Gen, strings.Join(what, "; "), allowText(ch.Allow)),
			Outcome: agentdv1.Outcome_OUTCOME_OK})
	}
	return &hubv1.ChangeSandboxEgressResponse{Egress: egressProto(ch.Egress), Added: ch.Added, Removed: ch.Removed, Closed: int32(ch.Closed)}, nil
}

// SetEnvironmentAllow sets an environment's allow list for its new
// sandboxes (admins).
func (v *environmentService) SetEnvironmentAllow(ctx context.Context, req *hubv1.SetEnvironmentAllowRequest) (*hubv1.SetEnvironmentAllowResponse, error) {
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
		if _, err := v.s.store.Environment(ctx, org.ID, name); errors.Is(err, store.ErrNotFound) {
			return nil, errs.New(errs.NotFound, "environment %s not found in org %s (a machine has no allow list to set); list them with 'agentctl env ls'", truncateRunes(name, 80), org.Name)
		} else if err != nil {
			return nil, storeError(err, "environment "+name)
		}
	}
	if len(req.GetAllow()) > 256 {
		return nil, errs.New(errs.Invalid, "--allow: %d entries: at most 256", len(req.GetAllow()))
	}
	list, err := m.SetEnvironmentAllow(ctx, org.ID, name, req.GetAllow())
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("set the allow list of environment %s's new sandboxes: %s", name, allowText(list))
	if len(list) == 0 {
		what = fmt.Sprintf("removed the allow list of environment %s: its new sandboxes get its network", name)
	}
	v.s.recordHub(ctx, org, &agentdv1.ActivityRecord{Actor: c.token.Name, Kind: kindEgressEnvironm, ObjectId: name,
		Summary: what, Outcome: agentdv1.Outcome_OUTCOME_OK})
	resp, err := v.GetEnvironment(ctx, &hubv1.GetEnvironmentRequest{Name: name, Org: req.GetOrg()})
	if err != nil {
		return nil, err
	}
	return &hubv1.SetEnvironmentAllowResponse{Environment: resp.GetEnvironment()}, nil
}

// allowText is a list in an activity summary.
func allowText(l []string) string {
	if len(l) == 0 {
		return "nothing allowed"
	}
	return strings.Join(l, ", ")
}

func egressProto(e sandboxes.Egress) *hubv1.SandboxEgress {
	p := &hubv1.SandboxEgress{Allow: e.Allow, Generation: e.Gen, CutGeneration: e.CutGen}
	if !e.ChangedAt.IsZero() {
		p.Changed = timestamppb.New(e.ChangedAt)
	}
	return p
}

// sandboxEgress is a listed sandbox's allow list, or nil (none, or it
// could not be read: the listing still lists it).
func (v *environmentService) sandboxEgress(ctx context.Context, id string) *hubv1.SandboxEgress {
	m := v.s.sandboxes
	if m == nil {
		return nil
	}
	e, err := m.StoredEgress(ctx, id)
	if err != nil {
		return nil
	}
	return egressProto(e)
}
