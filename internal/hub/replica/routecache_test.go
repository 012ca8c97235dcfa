package replica_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// serveReplica serves one more replica of h's control plane on st with
// rep's options (so unlike hubtest's replicas it may differ from h's), on
// loopback ports of its own; it returns the hub's address.
func serveReplica(tb testing.TB, st store.Store, rep replica.Options, log *zap.Logger) string {
	tb.Helper()
	ilis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	rep.Addr = ilis.Addr().String()
	srv, err := hub.New(tb.Context(), hub.Options{Store: st, Logger: log, Replica: &rep})
	if err != nil {
		tb.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, lis, nil) }()
	go func() { done <- srv.ServeInternal(ctx, ilis) }()
	tb.Cleanup(func() { cancel(); <-done; <-done })
	return lis.Addr().String()
}

// systemClient is a System client of the hub at addr acting for machine id.
func systemClient(tb testing.TB, addr, token, id string) (agentdv1.SystemServiceClient, context.Context) {
	tb.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	ctx := metadata.AppendToOutgoingContext(tb.Context(), "authorization", "Bearer "+token, "agentd-machine", id)
	return agentdv1.NewSystemServiceClient(cc), ctx
}

// TestCachedRouteFollowsTheMachine: A caches the route of a machine on B
// for a minute; the machine moves to C while B stays up. A sends at most
// one call to B (which fails UNAVAILABLE), then reaches the machine on C;
// a revoke through A still refuses the next call at once.
func TestCachedRouteFollowsTheMachine(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	opts := hubtest.Options{Store: openPostgres(t, url), Replica: &replica.Options{Heartbeat: 100 * time.Millisecond, RouteCache: time.Minute}}
	a := hubtest.Start(t, opts)
	b := a.Replica(openPostgres(t, url))
	c := a.Replica(openPostgres(t, url))
	lb := newRRBalancer(t, b.Addr)
	id, _ := runMachine(t, &hubtest.Hub{Store: b.Store, Org: b.Org, Token: b.Token, Addr: b.Addr, URL: lb.URL()})
	routed := func(to *hubtest.Hub) func() bool {
		return func() bool {
			r, err := a.Store.Route(t.Context(), id, time.Now().Add(-time.Minute))
			return err == nil && r.ReplicaID == to.Server.ReplicaID()
		}
	}
	eventually(t, 10*time.Second, "the tunnel on B", routed(b))
	sys, ctx := systemClient(t, a.Addr, a.Token, id)
	if _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); err != nil {
		t.Fatalf("Info through A, the machine on B: %v", err)
	}

	// The tunnel moves to C; B stays up.
	lb.use(c.Addr)
	lb.cut()
	eventually(t, 10*time.Second, "the tunnel on C", routed(c))
	_, err := sys.Info(ctx, &agentdv1.InfoRequest{})
	if err != nil && status.Code(err) != codes.Unavailable {
		t.Errorf("first call after the move: %v, want success or UNAVAILABLE", err)
	}
	if err != nil {
		t.Logf("first call after the move went to the old holder: %v", err)
	}
	if _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); err != nil {
		t.Errorf("second call after the move: %v, want it to reach the machine on C", err)
	}

	// Revoke through A: the next call through A is refused at once,
	// though A's cache still holds the route.
	actx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+a.Token)
	if _, err := adminClient(t, a).RevokeMachine(actx, &hubv1.RevokeMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Info(ctx, &agentdv1.InfoRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("call after the revoke: %v, want FAILED_PRECONDITION", err)
	}
}
