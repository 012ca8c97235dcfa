package sandboxes

import (
	"context"
	"errors"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Usage is one sample of what a sandbox uses.
type Usage struct {
	Sandbox store.Sandbox
	sandbox.Stats
	// CPUPercent is its CPU since the previous sample the manager took of
	// it, in percent of one core.
	CPUPercent float64
}

// firstSampleGap is how long Usage waits for a second sample of the
// sandboxes it has no earlier sample of (docker stats's own interval).
const firstSampleGap = time.Second

// keepSample is how long a sandbox's last sample serves as the previous
// one; older samples are dropped.
const keepSample = 10 * time.Minute

// Usage samples, through the engine, the sandboxes of sbs that this hub
// drives and that run or are paused; one whose container is gone or does
// not run is left out. CPU is measured against the previous sample the
// manager kept of each; for those it has none of, it samples again after
// a second (one wait for them all), so the first answer takes a second.
func (m *Manager) Usage(ctx context.Context, sbs []store.Sandbox) ([]Usage, error) {
	var out []Usage
	var fresh []int // indexes in out without a previous sample
	for _, sb := range sbs {
		if sb.Hub != m.o.HubID || sb.ContainerID == "" || sb.State == store.SandboxStopped {
			continue
		}
		s, ok, err := m.sample(ctx, sb.ContainerID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		u := Usage{Sandbox: sb, Stats: s}
		if prev, ok := m.previous(sb.ID, s); ok {
			u.CPUPercent = sandbox.CPUPercent(prev, s)
		} else {
			fresh = append(fresh, len(out))
		}
		out = append(out, u)
	}
	if len(fresh) > 0 {
		select {
		case <-time.After(firstSampleGap):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		for _, i := range fresh {
			u := &out[i]
			s, ok, err := m.sample(ctx, u.Sandbox.ContainerID)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // it stopped meanwhile: keep the first sample
			}
			m.previous(u.Sandbox.ID, s)
			u.CPUPercent = sandbox.CPUPercent(u.Stats, s)
			u.Stats = s
		}
	}
	return out, nil
}

// sample is the engine's sample of a container; false when it is gone or
// does not run.
func (m *Manager) sample(ctx context.Context, containerID string) (sandbox.Stats, bool, error) {
	s, err := m.o.Driver.Stats(ctx, containerID)
	if errors.Is(err, sandbox.ErrNotFound) {
		return sandbox.Stats{}, false, nil
	}
	if err != nil {
		return sandbox.Stats{}, false, EngineError(err, "sample the sandboxes' use")
	}
	return s, !s.Read.IsZero(), nil
}

// previous returns the sample kept of sandbox id, if any, and keeps cur in
// its place; it drops samples older than keepSample.
func (m *Manager) previous(id string, cur sandbox.Stats) (sandbox.Stats, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.samples == nil {
		m.samples = map[string]sandbox.Stats{}
	}
	for k, s := range m.samples {
		if cur.Read.Sub(s.Read) > keepSample {
			delete(m.samples, k)
		}
	}
	prev, ok := m.samples[id]
	m.samples[id] = cur
	return prev, ok
}
