package sandboxes

import (
	"context"
	"sync"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// cpuSampleParallel is how many sandboxes CPUSeconds samples at once.
const cpuSampleParallel = 8

// cpuCount is the manager's running count of CPU time, per org.
type cpuCount struct {
	mu   sync.Mutex
	seen map[string]uint64 // sandbox id → its CPU nanoseconds already counted
	org  map[string]uint64 // org id → nanoseconds counted in all
}

// CPUSeconds samples the sandboxes of sbs that this hub drives and that
// run or are paused (cpuSampleParallel at once, until ctx ends), and
// returns, per org id, the CPU seconds its sandboxes used since this
// hub started counting: a counter. A sandbox not sampled before ctx ended
// counts what earlier samples saw; one restarted (its container's count
// begins again) counts from its restart; one removed keeps what it used.
func (m *Manager) CPUSeconds(ctx context.Context, sbs []store.Sandbox) map[string]float64 {
	live := map[string]bool{}
	var todo []store.Sandbox
	for _, sb := range sbs {
		if sb.Hub == m.o.HubID && sb.ContainerID != "" && sb.State != store.SandboxStopped {
			live[sb.ID] = true
			todo = append(todo, sb)
		}
	}
	sem := make(chan struct{}, cpuSampleParallel)
	var wg sync.WaitGroup
	for _, sb := range todo {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, ok, err := m.sample(ctx, sb.ContainerID)
			if err != nil || !ok {
				return
			}
			m.cpu.add(sb.ID, sb.OrgID, s.CPUNanos)
		}()
	}
	wg.Wait()
	return m.cpu.totals(live)
}

func (c *cpuCount) add(id, org string, nanos uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen, c.org = map[string]uint64{}, map[string]uint64{}
	}
	seen, ok := c.seen[id]
	switch {
	case !ok:
		c.org[org] += nanos // first seen: all it used since it started
	case nanos >= seen:
		c.org[org] += nanos - seen
	default:
		c.org[org] += nanos // restarted: its count began again
	}
	c.seen[id] = nanos
}

// totals returns the counts in seconds and forgets the sandboxes that are
// no longer live (what they used stays in their org's count).
func (c *cpuCount) totals(live map[string]bool) map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.seen {
		if !live[id] {
			delete(c.seen, id)
		}
	}
	out := make(map[string]float64, len(c.org))
	for org, n := range c.org {
		out[org] = float64(n) / 1e9
	}
	return out
}
