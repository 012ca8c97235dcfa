package replica_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/replica"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestReplicaDiesMidStream: the replica holding a machine's tunnel goes
// away while a command streams to a client on another replica. The call
// fails UNAVAILABLE, the daemon reconnects through the load balancer to the
// surviving replica, and Attach from offset 0 returns every byte.
func TestReplicaDiesMidStream(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, hubtest.Options{Replica: &replica.Options{Heartbeat: 100 * time.Millisecond}})
	lb := newRRBalancer(t, b.Addr)
	id, _ := runMachine(t, &hubtest.Hub{Store: b.Store, Org: b.Org, Token: b.Token, Addr: b.Addr, URL: lb.URL()})
	routed := func(to *hubtest.Hub) func() bool {
		return func() bool {
			r, err := a.Store.Route(t.Context(), id, time.Now().Add(-time.Minute))
			return err == nil && r.ReplicaID == to.Server.ReplicaID()
		}
	}
	eventually(t, 10*time.Second, "the tunnel on B", routed(b))

	cc, err := grpc.NewClient(a.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+a.Token, "agentd-machine", id)
	proc := agentdv1.NewProcessServiceClient(cc)
	const n = 300
	st, err := proc.Start(ctx, &agentdv1.StartRequest{Command: fmt.Sprintf("for i in $(seq 1 %d); do echo line $i; sleep 0.01; done", n)})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || ev.GetEvent().GetStarted() == nil {
		t.Fatalf("first event %v, %v; want started", ev, err)
	}
	pid := ev.GetEvent().GetStarted().GetId()
	if ev, err = st.Recv(); err != nil || ev.GetEvent().GetOutput() == nil {
		t.Fatalf("second event %v, %v; want output", ev, err)
	}

	// B goes away; new connections reach A.
	lb.use(a.Addr)
	b.Stop()
	for err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("the stream through the dead replica ended with %v, want UNAVAILABLE", err)
	}
	eventually(t, 10*time.Second, "the daemon back, on A", routed(a))

	att, err := proc.Attach(ctx, &agentdv1.AttachRequest{Id: pid, FromOffset: 0})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for {
		resp, err := att.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("attach: %v", err)
		}
		ev := resp.GetEvent()
		if g := ev.GetGap(); g != nil {
			t.Errorf("attach: a gap %v", g)
		}
		got.Write(ev.GetOutput().GetData())
		if ev.GetExited() != nil {
			break
		}
	}
	var want strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if got.String() != want.String() {
		t.Errorf("attach --from 0 after the failover: %d bytes, want %d", got.Len(), want.Len())
	}
	if _, err := a.Store.Route(t.Context(), id, time.Now().Add(-time.Minute)); errors.Is(err, store.ErrNotFound) {
		t.Error("no route to the machine after the failover")
	}
}
