package replica_test

import (
	"net"
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
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	"github.com/devdepot-ai/agentd/internal/hub/store/storetest"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestForwardingFailsClearly: a machine routed to a replica that cannot
// take the call gets UNAVAILABLE saying why, never a hang or another
// machine's answer.
func TestForwardingFailsClearly(t *testing.T) {
	t.Parallel()
	st := openPostgres(t, pgtest.Database(t))
	a := hubtest.Start(t, hubtest.Options{Store: st, Replica: &replica.Options{Heartbeat: 100 * time.Millisecond, TTL: time.Minute}})

	// Something listening that is not a replica: a plain TCP listener
	// that accepts and says nothing valid.
	stranger, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	go func() {
		for {
			c, err := stranger.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	cc, err := grpc.NewClient(a.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	now := time.Now()
	for _, tt := range []struct {
		name, addr, want string
	}{
		{"no internal address", "", "takes no forwarded calls"},
		{"nothing listening", closedAddr, ""},
		{"not a replica", stranger.Addr().String(), ""},
	} {
		rid := store.NewID("r-")
		if err := st.RegisterReplica(t.Context(), store.Replica{ID: rid, Addr: tt.addr, StartedAt: now, HeartbeatAt: now}); err != nil {
			t.Fatal(err)
		}
		m, err := st.CreateMachine(t.Context(), store.Machine{OrgID: a.Org.ID, Name: tt.name, PublicKey: storetest.NewKey(t), CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetRoute(t.Context(), m.ID, rid, now); err != nil {
			t.Fatal(err)
		}
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+a.Token, "agentd-machine", m.ID)
		_, err = agentdv1.NewSystemServiceClient(cc).Info(ctx, &agentdv1.InfoRequest{})
		if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), tt.want) {
			t.Errorf("%s: Info = %v, want UNAVAILABLE %q", tt.name, err, tt.want)
		}
	}
}
