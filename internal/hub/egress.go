package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	conv  string
	allow allowlist.List
}

// newEgressProxy makes the hub's end of the sandboxes' egress proxy, served
// on their unix socket (package egressproxy says why a proxy).
func (s *Server) newEgressProxy() (*egressproxy.Proxy, error) {
	return egressproxy.NewProxy(egressproxy.ProxyOptions{
		Lookup: s.egressLookup,
		Dial:   s.opts.Sandboxes.EgressDial,
		Record: s.recordEgress,
		Logger: s.log.Named("sandbox"),
		// Now stays the real clock, not Options.Now: the sandboxes sign
		// their requests with it.
	})
}

// sandboxHandler serves the sandboxes' socket: CONNECT to the egress
// proxy, everything else (the tunnel) to mux.
func (s *Server) sandboxHandler(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			s.egress.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// grantEgress sets up a new sandbox with an allow list (none: nothing to
// do): its agentd serves the proxy, its processes get the proxy variables,
// its container keeps the list (for a restarted hub), the hub remembers it.
func (m *sandboxes) grantEgress(spec *sandbox.Spec, g egressGrant, id string) {
	if len(g.allow) == 0 {
		return
	}
	spec.Env = append(append(spec.Env, wire.EnvSandboxEgress+"="+wire.SandboxEgressProxy), wire.SandboxProxyEnv()...)
	spec.Labels[sandbox.LabelEgress] = g.allow.String()
	m.setEgress(id, &g)
}

// egressLookup gives the proxy a live sandbox's key and allow list.
func (s *Server) egressLookup(ctx context.Context, id string) (egressproxy.Grant, error) {
	if !isSandboxID(id) || s.sandboxes == nil {
		return egressproxy.Grant{}, egressproxy.ErrUnknownSandbox
	}
	m, err := s.store.Machine(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return egressproxy.Grant{}, egressproxy.ErrUnknownSandbox
	case err != nil:
		return egressproxy.Grant{}, err
	case !m.RevokedAt.IsZero():
		return egressproxy.Grant{}, fmt.Errorf("%w: %s was removed", egressproxy.ErrUnknownSandbox, id)
	}
	g, err := s.sandboxes.egressGrant(ctx, id)
	if err != nil {
		return egressproxy.Grant{}, err
	}
	return egressproxy.Grant{Key: m.PublicKey, Allow: g.allow}, nil
}

// egressGrant returns a sandbox's grant: remembered since its creation, or
// read back from its container's label (after a hub restart).
func (m *sandboxes) egressGrant(ctx context.Context, id string) (egressGrant, error) {
	m.mu.Lock()
	g, ok := m.egress[id]
	m.mu.Unlock()
	if ok {
		return g, nil
	}
	sb, err := m.s.store.Sandbox(ctx, id)
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
	g = egressGrant{org: sb.OrgID, conv: sb.Conversation, allow: allow}
	m.setEgress(id, &g)
	return g, nil
}

// setEgress remembers a sandbox's grant (nil: forgets it).
func (m *sandboxes) setEgress(id string, g *egressGrant) {
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
func (s *Server) recordEgress(ctx context.Context, ev egressproxy.Event) {
	g, err := s.sandboxes.egressGrant(ctx, ev.Sandbox)
	if err != nil {
		s.log.Warn("egress: no grant to record under", zap.String("sandbox", ev.Sandbox), zap.Error(err))
		return
	}
	r := &agentdv1.ActivityRecord{Actor: ev.Sandbox, Conversation: g.conv, ObjectId: ev.Sandbox, Path: ev.Target}
	switch {
	case ev.Allowed && ev.Err == nil:
		r.Kind, r.Outcome = wire.KindEgressAllow, agentdv1.Outcome_OUTCOME_OK
		r.Summary = fmt.Sprintf("egress to %s from %s", ev.Target, ev.Sandbox)
	case ev.Allowed:
		r.Kind, r.Outcome, r.Error = wire.KindEgressAllow, agentdv1.Outcome_OUTCOME_ERROR, ev.Err.Error()
		r.Summary = fmt.Sprintf("egress to %s from %s allowed, but it failed: %v", ev.Target, ev.Sandbox, ev.Err)
	default:
		r.Kind, r.Outcome, r.Error = wire.KindEgressDeny, agentdv1.Outcome_OUTCOME_ERROR, ev.Err.Error()
		r.Summary = fmt.Sprintf("refused egress to %s from %s: %v", ev.Target, ev.Sandbox, ev.Err)
	}
	s.recordHub(ctx, store.Org{ID: g.org}, r)
}
