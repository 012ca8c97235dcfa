package replica_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// TestEventsReachEveryReplica: activity collected on B reaches a watcher on
// A at once, and a revoke on A closes the tunnel B holds within a second
// (the hubs' heartbeat, which would catch it too, is an hour here).
func TestEventsReachEveryReplica(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, hubtest.Options{Heartbeat: time.Hour, Replica: &replica.Options{Heartbeat: 100 * time.Millisecond}})
	id, _ := runMachine(t, b)
	eventually(t, 10*time.Second, "the machine routed to B", func() bool {
		r, err := a.Store.Route(t.Context(), id, time.Now().Add(-time.Minute))
		return err == nil && r.Addr != ""
	})

	// A watcher on A, following; the command runs through B.
	cc, err := grpc.NewClient(a.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+a.Token))
	defer cancel()
	watch, err := hubv1.NewActivityServiceClient(cc).Watch(ctx, &hubv1.WatchRequest{MachineId: id})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan time.Time, 1)
	go func() {
		for {
			m, err := watch.Recv()
			if err != nil {
				return
			}
			if b, _ := protojson.Marshal(m.GetRecord()); strings.Contains(string(b), "marker-7f3a") {
				seen <- time.Now()
				return
			}
		}
	}()
	start := time.Now()
	if code, _, errOut := agentctl(t, b, id, "", "sh", "echo marker-7f3a"); code != 0 {
		t.Fatalf("exec through B: %d %s", code, errOut)
	}
	select {
	case at := <-seen:
		t.Logf("activity from B reached the watcher on A %s after the command started", at.Sub(start))
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher on A did not see the command run through B")
	}

	// Revoke on A: B closes the tunnel, and with it drops the route.
	_, err = adminClient(t, a).RevokeMachine(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+a.Token),
		&hubv1.RevokeMachineRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 5*time.Second, "B closed the revoked machine's tunnel", func() bool {
		_, err := a.Store.Route(t.Context(), id, time.Now().Add(-time.Minute))
		return errors.Is(err, store.ErrNotFound)
	})
	t.Logf("revoke on A closed the tunnel on B after %s", took)
	if took > time.Second {
		t.Errorf("revoke on A took %s to close the tunnel on B, want ≤ 1s", took)
	}
}
