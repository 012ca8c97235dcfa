package sandboxes

import (
	"context"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// fill tops up the warm pool of (org, environment) in the background.
func (m *Manager) fill(org store.Org, env envSpec) {
	want := m.o.WarmCustom
	if env.name == BuiltinEnvironment {
		want = m.o.WarmBuiltin
	}
	if want <= 0 {
		return
	}
	key := org.ID + "/" + env.name
	sbs, err := m.o.Store.ListSandboxes(context.WithoutCancel(m.ctx), org.ID)
	if err != nil {
		return
	}
	have := 0
	for _, sb := range sbs {
		if sb.Warm && sb.Environment == env.name && sb.Hub == m.o.HubID {
			have++
		}
	}
	m.mu.Lock()
	n := want - have - m.filling[key]
	if n > 0 {
		m.filling[key] += n
	}
	m.mu.Unlock()
	for range n {
		m.goFn(func(ctx context.Context) {
			made := false
			defer func() {
				m.mu.Lock()
				m.filling[key]--
				m.mu.Unlock()
				// A conversation may have claimed this sandbox while it
				// started (it is claimable once online), and that claim's
				// fill counted it as still filling: top up again. Only
				// after a success, so a failing create does not loop.
				if made {
					m.fill(org, env)
				}
			}()
			if _, err := m.create(ctx, org, env, "", true); err != nil {
				if ctx.Err() == nil {
					m.log.Warn("filling the warm pool", zap.String("environment", env.name), zap.Error(err))
				}
				return
			}
			made = true
		})
	}
}
