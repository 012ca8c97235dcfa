package sandboxes

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"
)

// metricsSampleTime bounds sampling the sandboxes' CPU for one scrape:
// those not sampled in time count what earlier scrapes saw.
const metricsSampleTime = 3 * time.Second

// WriteMetrics writes the hub-wide sandbox series of /metrics (the
// Prometheus text format): sandboxes by org, environment and state (from
// the store: every replica's), and the CPU seconds each org's sandboxes
// on this replica used (CPUSeconds). Orgs are named, since environment
// names are per org.
func (m *Manager) WriteMetrics(ctx context.Context, w io.Writer) error {
	sbs, err := m.o.Store.ListSandboxes(ctx, "")
	if err != nil {
		return fmt.Errorf("metrics: sandboxes: %w", err)
	}
	names := map[string]string{}
	orgName := func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		n := id
		if o, err := m.o.Store.Org(ctx, id); err == nil {
			n = o.Name
		}
		names[id] = n
		return n
	}
	type key struct{ org, env, state string }
	count := map[key]int{}
	for _, sb := range sbs {
		count[key{orgName(sb.OrgID), sb.Environment, sb.State}]++
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a.org < b.org || a.org == b.org && (a.env < b.env || a.env == b.env && a.state < b.state)
	})
	fmt.Fprintf(w, "# HELP agenthub_sandboxes Sandboxes, by org, environment and state.\n# TYPE agenthub_sandboxes gauge\n")
	for _, k := range keys {
		fmt.Fprintf(w, "agenthub_sandboxes{org=%q,environment=%q,state=%q} %d\n", k.org, k.env, k.state, count[k])
	}
	sctx, cancel := context.WithTimeout(ctx, metricsSampleTime)
	defer cancel()
	cpu := m.CPUSeconds(sctx, sbs)
	orgs := make([]string, 0, len(cpu))
	for id := range cpu {
		orgs = append(orgs, id)
	}
	sort.Slice(orgs, func(i, j int) bool { return orgName(orgs[i]) < orgName(orgs[j]) })
	fmt.Fprintf(w, "# HELP agenthub_sandbox_cpu_seconds_total CPU time the org's sandboxes on this replica used, since it started counting.\n# TYPE agenthub_sandbox_cpu_seconds_total counter\n")
	for _, id := range orgs {
		fmt.Fprintf(w, "agenthub_sandbox_cpu_seconds_total{org=%q} %.3f\n", orgName(id), cpu[id])
	}
	return nil
}
