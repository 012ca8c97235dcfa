package replica_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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

// balancer is a TCP load balancer for tests: it sends every new
// connection to the current backend.
type balancer struct {
	lis     net.Listener
	backend atomic.Pointer[string]
	wg      sync.WaitGroup
}

func newBalancer(t testing.TB, backend string) *balancer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &balancer{lis: lis}
	lb.backend.Store(&backend)
	lb.wg.Add(1)
	go lb.serve()
	t.Cleanup(func() { lis.Close(); lb.wg.Wait() })
	return lb
}

func (lb *balancer) URL() string { return "http://" + lb.lis.Addr().String() }

func (lb *balancer) point(backend string) { lb.backend.Store(&backend) }

func (lb *balancer) serve() {
	defer lb.wg.Done()
	for {
		c, err := lb.lis.Accept()
		if err != nil {
			return
		}
		lb.wg.Add(1)
		go func() {
			defer lb.wg.Done()
			defer c.Close()
			u, err := net.Dial("tcp", *lb.backend.Load())
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(u, c); done <- struct{}{} }()
			go func() { io.Copy(c, u); done <- struct{}{} }()
			<-done // either side ended: end both
			c.Close()
			u.Close()
			<-done
		}()
	}
}

// TestReplicaDiesMidStream: the replica holding a machine's tunnel goes
// away while a command streams to a client on another replica. The call
// fails UNAVAILABLE, the daemon reconnects through the load balancer to the
// surviving replica, and Attach from offset 0 returns every byte.
func TestReplicaDiesMidStream(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, hubtest.Options{Replica: &replica.Options{Heartbeat: 100 * time.Millisecond}})
	lb := newBalancer(t, b.Addr)
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
	lb.point(a.Addr)
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
