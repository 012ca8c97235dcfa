package hub_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// TestWatchNewest: the hub's WatchRequest.newest means what the daemon's
// WatchRequest.tail means (the newest N after the cursor, 0 none), and the
// deprecated int32 tail still works for older clients.
func TestWatchNewest(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ctx := t.Context()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.store.CreateMachine(ctx, store.Machine{OrgID: h.hub.Org.ID, Name: "box", PublicKey: pub, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var recs []store.Activity
	for seq := uint64(1); seq <= 30; seq++ {
		recs = append(recs, store.Activity{Seq: seq, Time: time.Now(), Record: fmt.Appendf(nil, `{"seq":%d,"kind":"files.stat"}`, seq)})
	}
	if err := h.store.AppendActivity(ctx, m.ID, recs); err != nil {
		t.Fatal(err)
	}
	all, err := h.store.ListActivity(ctx, store.ActivityQuery{OrgID: h.hub.Org.ID, Limit: 100})
	if err != nil || len(all) != 30 {
		t.Fatalf("stored %d records (%v), want 30", len(all), err)
	}
	tenth := all[9].ID

	seqs := func(from, to uint64) []uint64 {
		var s []uint64
		for i := from; i <= to; i++ {
			s = append(s, i)
		}
		return s
	}
	tests := []struct {
		name string
		req  *hubv1.WatchRequest
		want []uint64
	}{
		{"default: newest 20", &hubv1.WatchRequest{}, seqs(11, 30)},
		{"newest 3", &hubv1.WatchRequest{Newest: proto.Uint32(3)}, seqs(28, 30)},
		{"newest 0: none", &hubv1.WatchRequest{Newest: proto.Uint32(0)}, nil},
		{"newest more than stored", &hubv1.WatchRequest{Newest: proto.Uint32(500)}, seqs(1, 30)},
		{"newest after a cursor", &hubv1.WatchRequest{SinceId: tenth, Newest: proto.Uint32(5)}, seqs(26, 30)},
		{"newest 0 after a cursor", &hubv1.WatchRequest{SinceId: tenth, Newest: proto.Uint32(0)}, nil},
		{"cursor: everything after it", &hubv1.WatchRequest{SinceId: tenth}, seqs(11, 30)},
		{"one machine, newest 2", &hubv1.WatchRequest{MachineId: m.ID, Newest: proto.Uint32(2)}, seqs(29, 30)},
		{"deprecated tail 4", &hubv1.WatchRequest{Tail: 4}, seqs(27, 30)},
		{"newest wins over tail", &hubv1.WatchRequest{Tail: 4, Newest: proto.Uint32(1)}, seqs(30, 30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := proto.CloneOf(tt.req)
			req.NoFollow = true
			st, err := hubv1.NewActivityServiceClient(h.conn()).Watch(authCtx(ctx, h.owner, ""), req)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for {
				r, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r.GetRecord().GetSeq())
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("replayed seqs (-got +want):\n%s", diff)
			}
		})
	}
}
