package sandboxes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// egressGrant is what the hub's egress proxy knows of a sandbox with an
// allow list: the list, and where its records go.
type egressGrant struct {
	org   string // org id
	env   string // environment name
	conv  string
	allow allowlist.List
	// inject and leaf: brokered credentials (broker.go).
	inject []egressproxy.Inject
	leaf   func(host string) (*tls.Certificate, error)
}

// grantEgress sets up a new sandbox with an allow list (none: nothing to
// do): its agentd serves the proxy, its processes get the proxy variables,
// its container keeps the list (for a restarted hub), the hub remembers it.
func (m *Manager) grantEgress(spec *sandbox.Spec, g egressGrant, id string) {
	if len(g.allow) == 0 {
		return
	}
	spec.Env = append(append(spec.Env, wire.EnvSandboxEgress+"="+wire.SandboxEgressProxy), wire.SandboxProxyEnv()...)
	spec.Labels[sandbox.LabelEgress] = g.allow.String()
	m.setEgress(id, &g)
}

// egressLookup gives the proxy a live sandbox's key and allow list.
func (m *Manager) egressLookup(ctx context.Context, id string) (egressproxy.Grant, error) {
	if !IsID(id) {
		return egressproxy.Grant{}, egressproxy.ErrUnknownSandbox
	}
	mc, err := m.o.Store.Machine(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return egressproxy.Grant{}, egressproxy.ErrUnknownSandbox
	case err != nil:
		return egressproxy.Grant{}, err
	case !mc.RevokedAt.IsZero():
		return egressproxy.Grant{}, fmt.Errorf("%w: %s was removed", egressproxy.ErrUnknownSandbox, id)
	}
	g, err := m.egressGrant(ctx, id)
	if err != nil {
		return egressproxy.Grant{}, err
	}
	grant := egressproxy.Grant{Key: mc.PublicKey, Allow: g.allow, Inject: g.inject, Leaf: g.leaf,
		AllowPrivate: m.envAllowPrivate(ctx, g)}
	// The list as it is now (live_egress.go), on whichever replica it
	// changed; none stored: the list it was made with.
	if es := m.egressStore(); es != nil {
		e, err := es.SandboxEgress(ctx, id)
		switch {
		case err == nil:
			if grant.Allow, err = allowlist.ParseList(e.Allow); err != nil {
				return egressproxy.Grant{}, fmt.Errorf("sandbox %s's allow list: %w", id, err)
			}
			grant.Gen, grant.CutGen = e.Gen, e.CutGen
		case !errors.Is(err, store.ErrNotFound):
			return egressproxy.Grant{}, err
		}
	}
	return grant, nil
}

// egressGrant returns a sandbox's grant: remembered since its creation, or
// read back from its container's label (after a hub restart).
func (m *Manager) egressGrant(ctx context.Context, id string) (egressGrant, error) {
	m.mu.Lock()
	g, ok := m.egress[id]
	m.mu.Unlock()
	if ok {
		return g, nil
	}
	sb, err := m.o.Store.Sandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sb.ContainerID == "") {
		return egressGrant{}, egressproxy.ErrUnknownSandbox
	}
	if err != nil {
		return egressGrant{}, err
	}
	info, err := m.o.Driver.Inspect(ctx, sb.ContainerID)
	if err != nil {
		return egressGrant{}, err
	}
	list := info.Labels[sandbox.LabelEgress]
	if list == "" {
		return egressGrant{}, fmt.Errorf("%w: %s has no allow list", egressproxy.ErrUnknownSandbox, id)
	}
	allow, err := allowlist.ParseList(strings.Split(list, ","))
	if err != nil {
		return egressGrant{}, fmt.Errorf("sandbox %s's allow list: %w", id, err)
	}
	g = egressGrant{org: sb.OrgID, env: sb.Environment, conv: sb.Conversation, allow: allow}
	m.restoreBroker(ctx, &g, info.Labels)
	m.setEgress(id, &g)
	return g, nil
}

// setEgress remembers a sandbox's grant (nil: forgets it).
func (m *Manager) setEgress(id string, g *egressGrant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g == nil {
		delete(m.egress, id)
		return
	}
	m.egress[id] = *g
}

// recordEgress puts one connection the proxy opened or refused into the
// sandbox's org's activity (under the hub's record, the sandbox as actor).
func (m *Manager) recordEgress(ctx context.Context, ev egressproxy.Event) {
	g, err := m.egressGrant(ctx, ev.Sandbox)
	if err != nil {
		m.o.Logger.Warn("egress: no grant to record under", zap.String("sandbox", ev.Sandbox), zap.Error(err))
		return
	}
	r := &agentdv1.ActivityRecord{Actor: ev.Sandbox, Conversation: g.conv, ObjectId: ev.Sandbox, Path: ev.Target}
	switch {
	case ev.Allowed && ev.Err == nil:
		r.Kind, r.Outcome = wire.KindEgressAllow, agentdv1.Outcome_OUTCOME_OK
		r.Summary = fmt.Sprintf("egress to %s from %s", ev.Target, ev.Sandbox)
		if len(ev.Brokered) > 0 {
			r.Summary += " (brokered: the hub set " + strings.Join(ev.Brokered, ", ") + ")"
		}
	case ev.Allowed:
		r.Kind, r.Outcome, r.Error = wire.KindEgressAllow, agentdv1.Outcome_OUTCOME_ERROR, ev.Err.Error()
		r.Summary = fmt.Sprintf("egress to %s from %s allowed, but it failed: %v", ev.Target, ev.Sandbox, ev.Err)
	default:
		r.Kind, r.Outcome, r.Error = wire.KindEgressDeny, agentdv1.Outcome_OUTCOME_ERROR, ev.Err.Error()
		r.Summary = fmt.Sprintf("refused egress to %s from %s: %v", ev.Target, ev.Sandbox, ev.Err)
	}
	m.o.Record(ctx, g.org, r)
}
