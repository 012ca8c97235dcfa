package sandboxes

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// touch records a call's use of a sandbox (in the store at most once a
// minute).
func (m *Manager) touch(id string) {
	now := m.o.Now()
	m.mu.Lock()
	m.used[id] = now
	last := m.stored[id]
	store := now.Sub(last) >= time.Minute
	if store {
		m.stored[id] = now
	}
	m.mu.Unlock()
	if store {
		_ = m.o.Store.TouchSandbox(context.WithoutCancel(m.ctx), id, now)
	}
}

// hold counts the sandbox busy (the reaper leaves it alone) until the
// returned function is called.
func (m *Manager) hold(id string) func() {
	m.mu.Lock()
	m.active[id]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if m.active[id]--; m.active[id] <= 0 {
			delete(m.active, id)
		}
		m.mu.Unlock()
	}
}

// Enter counts a call in flight to a sandbox (the reaper leaves a busy
// sandbox alone) and returns what the call's end runs: it uncounts the
// call and, when the tunnel broke under it because the container stopped,
// says why (killed, out of memory) instead of gRPC's bare "EOF".
func (m *Manager) Enter(ctx context.Context, id string) func(error) error {
	m.mu.Lock()
	m.active[id]++
	m.mu.Unlock()
	m.touch(id)
	return func(err error) error {
		m.mu.Lock()
		if m.active[id]--; m.active[id] <= 0 {
			delete(m.active, id)
		}
		m.mu.Unlock()
		m.touch(id)
		if rpcerr.Code(err) == codes.Unavailable && ctx.Err() == nil {
			if why := m.stoppedUnder(context.WithoutCancel(ctx), id); why != "" {
				return errs.New(errs.Unavailable, "sandbox %s stopped under the call: %s; the conversation's next call starts it again (/workspace is kept, /tmp and HOME are not)", id, why)
			}
		}
		return err
	}
}

// stoppedUnder says why a sandbox's container stopped, or "" while it runs
// (it may take a moment to be seen stopped once its tunnel broke).
func (m *Manager) stoppedUnder(ctx context.Context, id string) string {
	sb, err := m.o.Store.Sandbox(ctx, id)
	if err != nil || sb.ContainerID == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		if sb.State == store.SandboxStopped {
			// Stopped by the policy or a person: that is why.
			return "sandbox stopped: " + strings.TrimPrefix(sb.StateReason, "stopped ")
		}
		info, err := m.o.Driver.Inspect(ctx, sb.ContainerID)
		switch {
		case errors.Is(err, sandbox.ErrNotFound):
			return "its container was removed"
		case err != nil:
			return ""
		case info.State != sandbox.StateRunning:
			return "its container " + exitReason(info)
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(100 * time.Millisecond):
		}
		if now, err := m.o.Store.Sandbox(ctx, id); err == nil {
			sb = now
		}
	}
}

// Remove removes one of the org's sandboxes (ErrNotFound: not the org's).
func (m *Manager) Remove(ctx context.Context, org store.Org, id string) error {
	sb, err := m.o.Store.Sandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sb.OrgID != org.ID) {
		return fail(ErrNotFound, errs.NotFound, "sandbox %s not found in org %s; list them with 'agentctl sandbox ls'", id, org.Name)
	}
	if err != nil {
		return unavailable("sandbox "+id, err)
	}
	m.destroy(ctx, sb, "removed"+m.byWhom(ctx))
	return nil
}

// RemoveEnvironment removes the org's sandboxes of an environment that
// was removed, and says how many went.
func (m *Manager) RemoveEnvironment(ctx context.Context, orgID, env string) Removed {
	return m.RetireEnvironment(ctx, orgID, env, "its environment was removed"+m.byWhom(ctx))
}

// Removed counts the sandboxes RetireEnvironment removed (the warm
// pool's, the hub's own, not counted), in every state, and of those the
// stopped and the archived ones.
type Removed struct {
	Sandboxes, Stopped, Archived int
}

// RetireEnvironment removes the org's sandboxes of an environment, saying
// why (its isolation changed, say): its next call gets a new one.
func (m *Manager) RetireEnvironment(ctx context.Context, orgID, env, why string) Removed {
	var n Removed
	sbs, _ := m.o.Store.ListSandboxes(ctx, orgID)
	for _, sb := range sbs {
		if sb.Environment != env {
			continue
		}
		if !sb.Warm {
			n.Sandboxes++
			switch stateOf(sb) {
			case store.SandboxStopped:
				n.Stopped++
			case store.SandboxArchived:
				n.Archived++
			}
		}
		m.destroy(context.WithoutCancel(ctx), sb, why)
	}
	return n
}

// Destroy removes a sandbox: its tunnel, container and workspace, machine
// identity and row (in the store only, when another replica drives it).
func (m *Manager) Destroy(ctx context.Context, sb store.Sandbox, why string) { m.destroy(ctx, sb, why) }
