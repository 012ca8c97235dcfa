package sandboxes

import (
	"context"
	"fmt"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/units"
)

// The lifecycle policy of an environment's sandboxes: after how long idle
// a sandbox is paused, stopped, archived and removed (the hub's defaults,
// with the environment's own over them), read by the reaper and by
// Status, set by agentctl env set --pause-after and the like.

// minPolicyStep is the shortest idle time a policy's step may have.
const minPolicyStep = 10 * time.Second

// ParsePolicyDuration reads one step of a lifecycle policy: a duration
// of at least 10 s ("90s", "5m", "2h", "7d") or "never" (store.Never).
func ParsePolicyDuration(s string) (time.Duration, error) {
	if s == "never" {
		return store.Never, nil
	}
	d, err := units.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration (like 5m, 2h, 7d) or never")
	}
	if d < minPolicyStep {
		return 0, fmt.Errorf("want at least %s, or never", minPolicyStep)
	}
	return d, nil
}

// policy is the lifecycle policy of one environment's sandboxes: the
// hub's defaults with the environment's own over them.
type policy struct {
	pauseAfter, stopAfter, archiveAfter, deleteAfter time.Duration // store.Never: never
}

// policy returns the lifecycle policy of the org's sandboxes of env. When
// the environment's own cannot be read it says so, with the hub's
// defaults: a caller that deletes must not act on them (the environment's
// own may say never).
func (m *Manager) policy(ctx context.Context, orgID, env string) (policy, error) {
	p := policy{pauseAfter: m.o.PauseAfter, stopAfter: m.o.StopAfter, archiveAfter: m.o.ArchiveAfter, deleteAfter: m.o.DeleteAfter}
	own, err := m.o.Store.SandboxPolicy(ctx, orgID, env)
	if err != nil {
		return p, err
	}
	for _, f := range []struct {
		own time.Duration
		to  *time.Duration
	}{{own.PauseAfter, &p.pauseAfter}, {own.StopAfter, &p.stopAfter}, {own.ArchiveAfter, &p.archiveAfter}, {own.DeleteAfter, &p.deleteAfter}} {
		if f.own != 0 {
			*f.to = f.own
		}
	}
	if m.o.Archive == nil {
		p.archiveAfter = store.Never // nowhere to archive to
	}
	return p, nil
}

// step is one step of a policy: the state it moves a sandbox to ("": it
// is removed), after how long idle.
type step struct {
	to    string
	after time.Duration
}

// steps are the policy's steps that apply, earliest first.
func (p policy) steps() []step {
	var out []step
	for _, s := range []step{{store.SandboxPaused, p.pauseAfter}, {store.SandboxStopped, p.stopAfter}, {store.SandboxArchived, p.archiveAfter}, {"", p.deleteAfter}} {
		if s.after > 0 {
			out = append(out, s)
		}
	}
	return out
}

// due returns the furthest step due for a sandbox in state idle for idle,
// and whether one is.
func (p policy) due(state string, idle time.Duration) (step, bool) {
	var out step
	found := false
	for _, s := range p.steps() {
		if idle >= s.after && (s.to == "" || rank(s.to) > rank(state)) {
			if !found || s.to == "" || rank(s.to) > rank(out.to) {
				out, found = s, true
			}
		}
	}
	return out, found
}

// next returns the next step a sandbox in state idle for idle is headed
// for, and whether there is one.
func (p policy) next(state string, idle time.Duration) (step, bool) {
	for _, s := range p.steps() {
		if s.after > idle && (s.to == "" || rank(s.to) > rank(state)) {
			return s, true
		}
	}
	return step{}, false
}

// PolicyText is the lifecycle policy of the org's sandboxes of env in
// words, each step a duration ("5m", "7d") or "never".
func (m *Manager) PolicyText(ctx context.Context, orgID, env string) (pause, stop, arch, del string) {
	p, _ := m.policy(ctx, orgID, env) // unreadable: the hub's, as shown
	return policyWord(p.pauseAfter), policyWord(p.stopAfter), policyWord(p.archiveAfter), policyWord(p.deleteAfter)
}

func policyWord(d time.Duration) string {
	if d <= 0 {
		return "never"
	}
	return roughly(d)
}

// SetPolicy sets steps of an environment's own policy: each non-nil one a
// duration ParsePolicyDuration takes, "never", or "default" (the hub's);
// nil keeps it. Bad input changes nothing.
func (m *Manager) SetPolicy(ctx context.Context, orgID, env string, pause, stop, arch, del *string) error {
	p, err := m.o.Store.SandboxPolicy(ctx, orgID, env)
	if err != nil {
		return unavailable("policy of environment "+env, err)
	}
	for _, f := range []struct {
		name string
		val  *string
		to   *time.Duration
	}{{"pause after", pause, &p.PauseAfter}, {"stop after", stop, &p.StopAfter}, {"archive after", arch, &p.ArchiveAfter}, {"delete after", del, &p.DeleteAfter}} {
		switch {
		case f.val == nil:
		case *f.val == "default":
			*f.to = 0
		default:
			d, err := ParsePolicyDuration(*f.val)
			if err != nil {
				return errs.New(errs.Invalid, "%s %q: %v, or default (the hub's)", f.name, *f.val, err)
			}
			*f.to = d
		}
	}
	if err := m.o.Store.SetSandboxPolicy(ctx, orgID, env, p); err != nil {
		return unavailable("policy of environment "+env, err)
	}
	return nil
}
