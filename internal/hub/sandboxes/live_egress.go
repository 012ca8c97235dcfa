package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Allow lists that change while a sandbox runs (agentctl sandbox allow |
// deny) and environments' lists for their new sandboxes (env set
// --allow). The list lives in the store with a generation; the egress
// proxy of the replica the sandbox dials looks it up on every CONNECT, so
// a change holds for the next connection on every replica. package
// egressproxy closes the tunnels a cutting change no longer allows.

// EgressStore is what the live allow lists ask of the store.
type EgressStore interface {
	CreateSandboxEgress(ctx context.Context, id string, allow []string, at time.Time) (store.SandboxEgress, error)
	SandboxEgress(ctx context.Context, id string) (store.SandboxEgress, error)
	ChangeSandboxEgress(ctx context.Context, id string, gen int64, allow []string, cut bool, at time.Time) (store.SandboxEgress, error)
	SetEnvironmentAllow(ctx context.Context, orgID, env string, allow []string) error
	EnvironmentAllow(ctx context.Context, orgID, env string) ([]string, error)
}

// ErrNoAllowList: the sandbox was made without an allow list (its network
// is public, or none without the proxy), so there is none to change while
// it runs (errs.Precondition).
var ErrNoAllowList = errors.New("no allow list")

// Egress is a sandbox's allow list as it is now.
type Egress struct {
	Allow     []string // canonical entries, host:port
	Gen       int64    // 1 as it was made, one more per change
	CutGen    int64    // the latest change that cut open connections (0: none)
	ChangedAt time.Time
}

// EgressChange is what ChangeEgress did.
type EgressChange struct {
	Egress
	// Added and Removed are the entries the change added and removed
	// (both empty: nothing changed, and Gen is the one before, unless
	// Cut).
	Added, Removed []string
	// Cut: the change closes open connections the new list does not allow.
	Cut bool
	// Closed is how many connections this replica closed at once (others
	// close theirs within a second).
	Closed int
}

// egressStore is the store as EgressStore, or nil when it is not one.
func (m *Manager) egressStore() EgressStore {
	es, _ := m.o.Store.(EgressStore)
	return es
}

// SandboxEgress returns a sandbox's allow list; ErrNoAllowList when it has
// none.
func (m *Manager) SandboxEgress(ctx context.Context, org store.Org, id string) (Egress, error) {
	sb, err := m.orgSandbox(ctx, org, id)
	if err != nil {
		return Egress{}, err
	}
	e, err := m.liveEgress(ctx, sb)
	if err != nil {
		return Egress{}, err
	}
	return Egress{Allow: e.Allow, Gen: e.Gen, CutGen: e.CutGen, ChangedAt: e.ChangedAt}, nil
}

// orgSandbox is the org's sandbox id, or NOT_FOUND.
func (m *Manager) orgSandbox(ctx context.Context, org store.Org, id string) (store.Sandbox, error) {
	sb, err := m.o.Store.Sandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sb.OrgID != org.ID) {
		return store.Sandbox{}, fail(ErrNotFound, errs.NotFound, "sandbox %s not found in org %s; list them with 'agentctl sandbox ls'", truncate(id), org.Name)
	}
	if err != nil {
		return store.Sandbox{}, unavailable("sandbox "+id, err)
	}
	return sb, nil
}

// liveEgress reads a sandbox's list from the store; one made before lists
// were stored gets its row from its container's label (generation 1).
func (m *Manager) liveEgress(ctx context.Context, sb store.Sandbox) (store.SandboxEgress, error) {
	es := m.egressStore()
	if es == nil {
		return store.SandboxEgress{}, fail(ErrNoAllowList, errs.Precondition, "this hub's store keeps no allow lists")
	}
	e, err := es.SandboxEgress(ctx, sb.ID)
	if err == nil {
		return e, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.SandboxEgress{}, unavailable("allow list of "+sb.ID, err)
	}
	g, gerr := m.egressGrant(ctx, sb.ID)
	if gerr != nil {
		return store.SandboxEgress{}, fail(ErrNoAllowList, errs.Precondition,
			"sandbox %s was made without an allow list (its network is open, or none at all), so it has none to change while it runs; "+
				"sandboxes get one from 'agentctl env set ENV --allow HOST…' or 'agentctl agent run PROFILE --allow HOST'", sb.ID)
	}
	e, err = es.CreateSandboxEgress(ctx, sb.ID, g.allow.Strings(), m.o.Now())
	if errors.Is(err, store.ErrConflict) { // made meanwhile
		e, err = es.SandboxEgress(ctx, sb.ID)
	}
	if err != nil {
		return store.SandboxEgress{}, unavailable("allow list of "+sb.ID, err)
	}
	return e, nil
}

// ChangeEgress adds the entries allow to the sandbox's list and removes
// those deny names (a HOST removes every port of it, HOST:PORT that one),
// as one new generation. A bad entry, or a deny that matches nothing
// (without cut), is INVALID_ARGUMENT and changes nothing. cut closes the
// connections open before it that the new list does not allow.
func (m *Manager) ChangeEgress(ctx context.Context, org store.Org, actor, id string, allow, deny []string, cut bool) (EgressChange, error) {
	switch n := len(allow) + len(deny); {
	case n == 0:
		return EgressChange{}, errs.New(errs.Invalid, "nothing to change: give destinations to allow or deny")
	case n > maxEntries:
		return EgressChange{}, errs.New(errs.Invalid, "%d destinations in one change: at most %d", n, maxEntries)
	}
	add, err := allowlist.ParseList(allow)
	if err != nil {
		return EgressChange{}, errs.New(errs.Invalid, "%v", err)
	}
	drop := make([]allowlist.Entry, len(deny))
	anyPort := make([]bool, len(deny))
	for i, d := range deny {
		if drop[i], err = allowlist.Parse(d); err != nil {
			return EgressChange{}, errs.New(errs.Invalid, "%v", err)
		}
		anyPort[i] = !strings.Contains(strings.TrimPrefix(d, "*."), ":")
	}
	sb, err := m.orgSandbox(ctx, org, id)
	if err != nil {
		return EgressChange{}, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := m.liveEgress(ctx, sb)
		if err != nil {
			return EgressChange{}, err
		}
		next, added, removed, err := applyChange(cur.Allow, add, drop, anyPort, cut)
		if err != nil {
			return EgressChange{}, err
		}
		ch := EgressChange{Added: added, Removed: removed, Cut: cut}
		if len(added) == 0 && len(removed) == 0 && !cut {
			ch.Egress = Egress{Allow: cur.Allow, Gen: cur.Gen, CutGen: cur.CutGen, ChangedAt: cur.ChangedAt}
			return ch, nil
		}
		e, err := m.egressStore().ChangeSandboxEgress(ctx, sb.ID, cur.Gen, next, cut, m.o.Now())
		if errors.Is(err, store.ErrConflict) && attempt < 10 {
			continue // another change came first: apply this one to its list
		}
		if err != nil {
			return EgressChange{}, unavailable("allow list of "+sb.ID, err)
		}
		ch.Egress = Egress{Allow: e.Allow, Gen: e.Gen, CutGen: e.CutGen, ChangedAt: e.ChangedAt}
		if cut && m.sock != nil {
			ch.Closed, _ = m.sock.egress.Recheck(ctx, sb.ID)
		}
		m.recordChange(ctx, org.ID, actor, KindEgressChange, sb.ID, ch.Summary(sb.ID))
		return ch, nil
	}
}

// applyChange is list with add appended (those not on it) and drop
// removed; the entries added and removed.
func applyChange(list []string, add allowlist.List, drop []allowlist.Entry, anyPort []bool, cut bool) (next, added, removed []string, err error) {
	next = slices.Clone(list)
	for i, d := range drop {
		n := len(next)
		next = slices.DeleteFunc(next, func(s string) bool {
			e, perr := allowlist.Parse(s)
			if perr != nil {
				return false
			}
			if e.Host != d.Host || e.Wildcard != d.Wildcard || (!anyPort[i] && e.Port != d.Port) {
				return false
			}
			removed = append(removed, s)
			return true
		})
		if len(next) == n && !cut {
			what := d.String()
			if anyPort[i] {
				what = strings.TrimSuffix(what, fmt.Sprintf(":%d", d.Port))
			}
			return nil, nil, nil, errs.New(errs.Invalid, "%s is not on the sandbox's allow list (%s); nothing changed", what, listText(list))
		}
	}
	for _, e := range add {
		if s := e.String(); !slices.Contains(next, s) {
			next = append(next, s)
			added = append(added, s)
		}
	}
	return next, added, removed, nil
}

// listText is a list for a message: "a:443, b:80", or "empty".
func listText(l []string) string {
	if len(l) == 0 {
		return "empty"
	}
	return strings.Join(l, ", ")
}

// SetEnvironmentAllow sets the allow list of an environment's new
// sandboxes (empty: none; they get the environment's network). Its warm
// sandboxes, made under the old list, are removed; those of conversations
// keep theirs (sandbox allow | deny changes them).
// actor is who asked, for the activity.
func (m *Manager) SetEnvironmentAllow(ctx context.Context, org store.Org, actor, env string, allow []string) error {
	if env != BuiltinEnvironment {
		if _, err := m.o.Store.Environment(ctx, org.ID, env); errors.Is(err, store.ErrNotFound) {
			return fail(ErrNotFound, errs.NotFound, "environment %s not found in org %s (a machine has no allow list to set); list them with 'agentctl env ls'", truncate(env), org.Name)
		} else if err != nil {
			return unavailable("environment "+env, err)
		}
	}
	if len(allow) > maxEntries {
		return errs.New(errs.Invalid, "--allow: %d entries: at most %d", len(allow), maxEntries)
	}
	list, err := allowlist.ParseList(allow)
	if err != nil {
		return errs.New(errs.Invalid, "--allow: %v", err)
	}
	es := m.egressStore()
	if es == nil {
		return errs.New(errs.Precondition, "this hub's store keeps no allow lists")
	}
	canon := list.Strings()
	slices.Sort(canon)
	canon = slices.Compact(canon)
	if err := es.SetEnvironmentAllow(ctx, org.ID, env, canon); err != nil {
		return unavailable("allow list of environment "+env, err)
	}
	sbs, _ := m.o.Store.ListSandboxes(ctx, org.ID)
	for _, sb := range sbs {
		if sb.Environment == env && sb.Warm && sb.Conversation == "" {
			m.destroy(context.WithoutCancel(ctx), sb, "its environment's allow list changed")
		}
	}
	what := fmt.Sprintf("set the allow list of environment %s's new sandboxes: %s", env, strings.Join(canon, ", "))
	if len(canon) == 0 {
		what = fmt.Sprintf("removed the allow list of environment %s: its new sandboxes get its network", env)
	}
	m.recordChange(ctx, org.ID, actor, KindEnvironmentAllow, env, what)
	return nil
}

// maxEntries bounds the destinations of one change or list.
const maxEntries = 256

// Activity kinds of changes to allow lists: a running sandbox's (sandbox
// allow | deny), an environment's (env set --allow).
const (
	KindEgressChange     = "egress.change"
	KindEnvironmentAllow = "environment.allow"
)

// Summary is the change in the activity's words, or "" when nothing
// changed.
func (c EgressChange) Summary(id string) string {
	var what []string
	if len(c.Added) > 0 {
		what = append(what, "allowed "+strings.Join(c.Added, ", "))
	}
	if len(c.Removed) > 0 {
		what = append(what, "denied "+strings.Join(c.Removed, ", "))
	}
	if c.Cut {
		what = append(what, "cut open connections it no longer allows")
	}
	if len(what) == 0 {
		return ""
	}
	now := "nothing allowed"
	if len(c.Allow) > 0 {
		now = strings.Join(c.Allow, ", ")
	}
	return fmt.Sprintf("changed the allow list of %s to generation %d: %s; now %s", id, c.Gen, strings.Join(what, "; "), now)
}

// EnvironmentAllow is an environment's allow list for its new sandboxes
// (nil: none).
func (m *Manager) EnvironmentAllow(ctx context.Context, orgID, env string) ([]string, error) {
	es := m.egressStore()
	if es == nil {
		return nil, nil
	}
	return es.EnvironmentAllow(ctx, orgID, env)
}

// withEnvironmentAllow gives a new sandbox of an environment (not an
// agent run's, which brings its own) the environment's allow list: then
// it has no network but the hub's egress proxy to the list.
func (m *Manager) withEnvironmentAllow(ctx context.Context, orgID string, env *envSpec) error {
	if env.limits != nil || len(env.allow) > 0 {
		return nil // an agent run's
	}
	l, err := m.EnvironmentAllow(ctx, orgID, env.name)
	if err != nil {
		return unavailable("allow list of environment "+env.name, err)
	}
	if len(l) == 0 {
		return nil
	}
	list, err := allowlist.ParseList(l)
	if err != nil {
		return unavailable("allow list of environment "+env.name, err)
	}
	env.allow, env.network = list, "none"
	return nil
}

func truncate(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}

// storeEgress stores a new sandbox's allow list at generation 1 (none:
// nothing to do).
func (m *Manager) storeEgress(ctx context.Context, id string, allow allowlist.List) error {
	es := m.egressStore()
	if len(allow) == 0 || es == nil {
		return nil
	}
	if _, err := es.CreateSandboxEgress(ctx, id, allow.Strings(), m.o.Now()); err != nil {
		return unavailable("allow list of "+id, err)
	}
	return nil
}

// StoredEgress is a sandbox's list as stored, without looking further
// (ErrNoAllowList: none stored).
func (m *Manager) StoredEgress(ctx context.Context, id string) (Egress, error) {
	es := m.egressStore()
	if es == nil {
		return Egress{}, ErrNoAllowList
	}
	e, err := es.SandboxEgress(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Egress{}, ErrNoAllowList
	}
	if err != nil {
		return Egress{}, err
	}
	return Egress{Allow: e.Allow, Gen: e.Gen, CutGen: e.CutGen, ChangedAt: e.ChangedAt}, nil
}

// recordChange puts an admin's change into the org's activity (nothing changed:
// nothing to record).
func (m *Manager) recordChange(ctx context.Context, orgID, actor, kind, object, summary string) {
	if summary == "" || m.o.Record == nil {
		return
	}
	m.o.Record(ctx, orgID, &agentdv1.ActivityRecord{Actor: actor, Kind: kind, ObjectId: object, Summary: summary, Outcome: agentdv1.Outcome_OUTCOME_OK})
}
