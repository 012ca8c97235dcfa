package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	"go.uber.org/zap"

	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// /metrics counts the calls and refusals of every org, so on the hub's
// port it is for the hub owner: a request carries the owner's API token
// (Authorization: Bearer agt_…), as a Prometheus scrape config's
// authorization.credentials does. MetricsHandler serves the same without a
// token, for a listener the operator keeps to the host (agenthub serve
// --metrics-listen 127.0.0.1:PORT).

// ownerOnly serves h to requests with a hub owner's API token: 401 without
// a valid token, 403 with another's.
func (s *Server) ownerOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := metadata.NewIncomingContext(r.Context(), metadata.Pairs(wire.MDAuthorization, r.Header.Get("Authorization")))
		c, err := s.auth.resolve(ctx)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agenthub"`)
			http.Error(w, rpcerr.Message(err), http.StatusUnauthorized)
			return
		}
		if !c.owner {
			http.Error(w, "/metrics shows every org's calls: it needs the hub owner's API token (agenthub init's), or agenthub serve --metrics-listen on loopback", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// MetricsHandler serves /metrics without a token, for a listener only the
// hub's host reaches.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	return mux
}

// metricsSampleTime bounds sampling the sandboxes' CPU for one scrape:
// those not sampled in time count what earlier scrapes saw.
const metricsSampleTime = 3 * time.Second

// sandboxMetrics writes the hub-wide sandbox series: sandboxes by org,
// environment and state (from the store: every replica's), and the CPU
// seconds each org's sandboxes used (those this replica drives).
func (s *Server) sandboxMetrics(ctx context.Context, w io.Writer) {
	if s.sandboxes == nil {
		return
	}
	sbs, err := s.store.ListSandboxes(ctx, "")
	if err != nil {
		s.log.Warn("metrics: sandboxes", zap.Error(err))
		return
	}
	names := map[string]string{}
	orgName := func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		n := id
		if o, err := s.store.Org(ctx, id); err == nil {
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
	cpu := s.sandboxes.CPUSeconds(sctx, sbs)
	orgs := make([]string, 0, len(cpu))
	for id := range cpu {
		orgs = append(orgs, id)
	}
	sort.Slice(orgs, func(i, j int) bool { return orgName(orgs[i]) < orgName(orgs[j]) })
	fmt.Fprintf(w, "# HELP agenthub_sandbox_cpu_seconds_total CPU time the org's sandboxes on this replica used, since it started counting.\n# TYPE agenthub_sandbox_cpu_seconds_total counter\n")
	for _, id := range orgs {
		fmt.Fprintf(w, "agenthub_sandbox_cpu_seconds_total{org=%q} %.3f\n", orgName(id), cpu[id])
	}
}
