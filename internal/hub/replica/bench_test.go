package replica_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// BenchmarkRoutedCall times a small unary call (System.Info) to a machine
// whose tunnel B holds, sent to B (the holder) and to A (one hop more), and
// reports each one's median.
func BenchmarkRoutedCall(b *testing.B) {
	ra, rb := twoReplicas(b, hubtest.Options{Replica: &replica.Options{}})
	id, _ := runMachine(b, rb)
	for _, bc := range []struct {
		name string
		to   *hubtest.Hub
	}{{"holder", rb}, {"one hop", ra}} {
		b.Run(bc.name, func(b *testing.B) {
			cc, err := grpc.NewClient(bc.to.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			ctx := metadata.AppendToOutgoingContext(b.Context(), "authorization", "Bearer "+bc.to.Token, "agentd-machine", id)
			sys := agentdv1.NewSystemServiceClient(cc)
			// Until the route is known (the tunnel may still be coming up).
			deadline := time.Now().Add(10 * time.Second)
			for _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); err != nil; _, err = sys.Info(ctx, &agentdv1.InfoRequest{}) {
				if time.Now().After(deadline) {
					b.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
