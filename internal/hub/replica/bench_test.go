package replica_test

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// BenchmarkRoutedCall times a small unary call (System.Info) to a machine
// whose tunnel replica B holds, side by side in one loop: sent to B (the
// holder), to A (one hop more, A's route cache on: the default), to C (one
// hop more, route cache off: a Postgres lookup per call, as before the
// cache), and the route lookup alone (the query C makes). It reports each
// one's p50 and p99, and the extra hop's p50 with and without the cache.
// Three hub servers in this process, each with its own listeners, pool
// and registry, on one PostgreSQL cluster (pgtest); a real agentd on B.
func BenchmarkRoutedCall(b *testing.B) {
	url := pgtest.Database(b)
	a := hubtest.Start(b, hubtest.Options{Store: openPostgres(b, url), Replica: &replica.Options{}, Logger: zap.NewNop()})
	holder := a.Replica(openPostgres(b, url))
	uncached := serveReplica(b, openPostgres(b, url), replica.Options{RouteCache: -1}, zap.NewNop())
	id, _ := runMachine(b, holder)
	lookups := openPostgres(b, url)

	targets := []struct{ name, addr string }{{"holder", holder.Addr}, {"hop", a.Addr}, {"hop-nocache", uncached}}
	calls := make([]func() error, 0, len(targets)+1)
	for _, tg := range targets {
		sys, ctx := systemClient(b, tg.addr, a.Token, id)
		call := func() error { _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); return err }
		// Until the machine is reachable there (the tunnel and its route
		// may still be coming up).
		deadline := time.Now().Add(10 * time.Second)
		for err := call(); err != nil; err = call() {
			if time.Now().After(deadline) {
				b.Fatalf("%s: %v", tg.name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		calls = append(calls, call)
	}
	calls = append(calls, func() error {
		_, err := lookups.Route(b.Context(), id, time.Now().Add(-5*time.Second))
		return err
	})
	names := []string{"holder", "hop", "hop-nocache", "lookup"}

	took := make([][]time.Duration, len(calls))
	for b.Loop() {
		for i, call := range calls {
			start := time.Now()
			if err := call(); err != nil {
				b.Fatalf("%s: %v", names[i], err)
			}
			took[i] = append(took[i], time.Since(start))
		}
	}
	p50 := make([]float64, len(calls))
	for i, d := range took {
		slices.Sort(d)
		p50[i] = ms(d[len(d)/2])
		b.ReportMetric(p50[i], names[i]+"-p50-ms")
		b.ReportMetric(ms(d[len(d)*99/100]), names[i]+"-p99-ms")
	}
	b.ReportMetric(p50[1]-p50[0], "extra-hop-ms")
	b.ReportMetric(p50[2]-p50[0], "extra-hop-nocache-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
