package hub_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/hub/activitylog"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
	"github.com/devdepot-ai/agentd/transport"
)

// forger is a fake daemon on a real tunnel: its ActivityService.Watch
// sends whatever the test puts on its channel, as a hostile sandbox
// serving its own Watch would.
type forger struct {
	agentdv1.UnimplementedActivityServiceServer
	agentdv1.UnimplementedSystemServiceServer
	recs  chan *agentdv1.ActivityRecord
	since chan uint64 // each Watch's since_seq
	stop  func()      // closes its tunnel
}

func (f *forger) Watch(req *agentdv1.WatchRequest, st grpc.ServerStreamingServer[agentdv1.WatchResponse]) error {
	f.since <- req.GetSinceSeq()
	for {
		select {
		case <-st.Context().Done():
			return nil
		case r, ok := <-f.recs:
			if !ok {
				return nil // endWatch: the stream ends after what was sent
			}
			if err := st.Send(&agentdv1.WatchResponse{Record: r}); err != nil {
				return err
			}
		}
	}
}

func (f *forger) Info(context.Context, *agentdv1.InfoRequest) (*agentdv1.InfoResponse, error) {
	return &agentdv1.InfoResponse{Version: "forger"}, nil
}

// pairForger makes a machine in the hub's store, whose key the forger
// holds (as a hostile sandbox holds its own).
func pairForger(t *testing.T, h *hubEnv) (string, ed25519.PrivateKey) {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.store.CreateMachine(t.Context(), store.Machine{OrgID: h.hub.Org.ID, Name: "forger", PublicKey: pub, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID, key
}

// serveForger serves a forger on a tunnel of the machine; it returns once
// the hub's Watch is open, with the since_seq the hub asked for.
func serveForger(t *testing.T, h *hubEnv, id string, key ed25519.PrivateKey) (*forger, uint64) {
	t.Helper()
	f := &forger{recs: make(chan *agentdv1.ActivityRecord), since: make(chan uint64, 4)}
	srv := grpc.NewServer()
	agentdv1.RegisterActivityServiceServer(srv, f)
	agentdv1.RegisterSystemServiceServer(srv, f)
	tun, err := transport.Listen(transport.Options{HubURL: h.url, MachineID: id, Key: key,
		Backoff: transport.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(tun) }()
	var once sync.Once
	f.stop = func() { once.Do(func() { tun.Close(); srv.Stop(); <-done }) }
	t.Cleanup(f.stop)
	select {
	case since := <-f.since:
		return f, since
	case <-time.After(20 * time.Second):
		t.Fatal("the hub never opened the forger's Watch")
	}
	return nil, 0
}

// send hands the forger's Watch one record.
func (f *forger) send(t *testing.T, r *agentdv1.ActivityRecord) {
	t.Helper()
	select {
	case f.recs <- r:
	case <-time.After(20 * time.Second):
		t.Fatal("the hub stopped reading the forger's Watch")
	}
}

// hubRecords are the org's records about machine, as the hub's Watch
// serves them, once cond holds of them (or the test fails).
func hubRecords(t *testing.T, h *hubEnv, machine string, cond func([]*hubv1.WatchResponse) bool) []*hubv1.WatchResponse {
	t.Helper()
	var got []*hubv1.WatchResponse
	client := hubv1.NewActivityServiceClient(h.conn()) // one connection: the hub caps them per address
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = got[:0]
		st, err := client.Watch(authCtx(t.Context(), h.owner, ""),
			&hubv1.WatchRequest{MachineId: machine, SinceId: 0, Newest: ptr(uint32(1000)), NoFollow: true})
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := st.Recv()
			if err != nil {
				break
			}
			got = append(got, r)
		}
		if cond(got) {
			return got
		}
	}
	t.Fatalf("the hub's records about %s never met the test's condition; last:\n%s", machine, lines(got))
	return nil
}

func ptr[T any](v T) *T { return &v }

func lines(rs []*hubv1.WatchResponse) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %s seq %d %s actor=%q claimed=%q %s\n", r.GetSource(), r.GetRecord().GetSeq(), r.GetRecord().GetKind(),
			r.GetRecord().GetActor(), r.GetRecord().GetClaimedActor(), r.GetRecord().GetSummary())
	}
	return b.String()
}

func forged(seq uint64, kind, summary string) *agentdv1.ActivityRecord {
	return &agentdv1.ActivityRecord{Seq: seq, Time: timestamppb.Now(), Actor: "admin", Kind: kind, Summary: summary,
		Outcome: agentdv1.Outcome_OUTCOME_OK}
}

func find(rs []*hubv1.WatchResponse, pred func(*hubv1.WatchResponse) bool) *hubv1.WatchResponse {
	for _, r := range rs {
		if pred(r) {
			return r
		}
	}
	return nil
}

// A daemon's Watch is its account, not the hub's fact: a forged record
// under an admin's name is stored as the daemon's, without that actor; a
// jump to a high sequence number is a gap note, and the records after it
// still appear and move the hub's cursor, which a reconnect resumes from.
func TestActivityForgedAccount(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	id, key := pairForger(t, h)
	f, _ := serveForger(t, h, id, key)

	f.send(t, forged(1, "process.exit", "ran `rm -rf /srv/data` in /"))
	f.send(t, forged(2, "file.write", "wrote /etc/motd"))
	f.send(t, forged(1_000_000_000, "file.write", "the forged jump"))
	f.send(t, forged(3, "file.write", "genuine after the jump"))
	f.send(t, forged(4, "file.write", "genuine, later"))

	got := hubRecords(t, h, id, func(rs []*hubv1.WatchResponse) bool {
		return find(rs, func(r *hubv1.WatchResponse) bool { return r.GetRecord().GetSummary() == "genuine, later" }) != nil
	})
	for _, r := range got {
		if r.GetRecord().GetActor() != "" {
			t.Errorf("a record about the forger carries actor %q (source %q): the hub authenticated nobody\n%s", r.GetRecord().GetActor(), r.GetSource(), lines(got))
		}
	}
	rm := find(got, func(r *hubv1.WatchResponse) bool { return strings.Contains(r.GetRecord().GetSummary(), "rm -rf") })
	if rm == nil || rm.GetSource() != "daemon" || rm.GetRecord().GetClaimedActor() != "admin" {
		t.Errorf("the forged rm -rf record = %v; want source daemon, claimed_actor admin, no actor", rm)
	}
	gap := find(got, func(r *hubv1.WatchResponse) bool { return r.GetRecord().GetKind() == "activity.gap" })
	if gap == nil || gap.GetSource() != "hub" || !strings.Contains(gap.GetRecord().GetSummary(), "from 2 to 1000000000") {
		t.Errorf("no hub gap note for the jump 2 -> 1000000000:\n%s", lines(got))
	}
	if seq, err := h.store.LastSeq(t.Context(), id); err != nil || seq != 4 {
		t.Errorf("the hub's cursor after 1, 2, 1000000000, 3, 4 = %d (%v), want 4", seq, err)
	}

	// A new tunnel (the genuine daemon back, say) is asked from 4, not from
	// the forged number.
	if _, since := serveForger(t, h, id, key); since != 4 {
		t.Errorf("the hub resumed the Watch after %d, want 4", since)
	}
}

// A daemon's account is bounded at the hub: a 1 MB record is stored cut
// to the record limit, and a flood past the machine's rate is dropped,
// counted in one note, so the database stays small.
func TestActivityForgedFlood(t *testing.T) {
	t.Parallel()
	// A bucket that does not refill during the test: the burst is stored.
	lim := activitylog.Limits{PerSecond: 0.001, Burst: 40}
	hb := hubtest.Start(t, hubtest.Options{ActivityLimits: lim})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	id, key := pairForger(t, h)
	f, _ := serveForger(t, h, id, key)
	stop := f.stop

	big := bytes.Repeat([]byte("A"), 1<<20)
	const huge, small = 10, 400
	for i := range huge {
		r := forged(uint64(i+1), "process.exit", "a 1 MB record")
		r.Output, r.Command = big, string(big)
		f.send(t, r)
	}
	for i := range small {
		f.send(t, forged(uint64(huge+i+1), "file.write", "flood"))
	}
	// The note of what was dropped comes with the next record let through,
	// or when the Watch ends. Ended in order (not by closing the tunnel,
	// which could lose records still in flight to the hub), then closed.
	close(f.recs)
	got := hubRecords(t, h, id, func(rs []*hubv1.WatchResponse) bool {
		return find(rs, func(r *hubv1.WatchResponse) bool { return r.GetRecord().GetKind() == "activity.dropped" }) != nil
	})
	stop()
	stored, err := h.store.ListActivity(t.Context(), store.ActivityQuery{OrgID: hb.Org.ID, MachineID: id, Limit: store.MaxActivityLimit})
	if err != nil {
		t.Fatal(err)
	}
	var daemon, total int
	for _, a := range stored {
		total += len(a.Record)
		if len(a.Record) > 64<<10 {
			t.Errorf("record %d is %d bytes, over the 64 KiB limit", a.Seq, len(a.Record))
		}
		if a.Source == store.SourceDaemon {
			daemon++
		}
	}
	if daemon != lim.Burst {
		t.Errorf("stored %d of the daemon's %d records; want %d (the burst)", daemon, huge+small, lim.Burst)
	}
	if total > (huge*64<<10)+small*1024 {
		t.Errorf("the forger's records hold %d bytes", total)
	}
	note := find(got, func(r *hubv1.WatchResponse) bool { return r.GetRecord().GetKind() == "activity.dropped" })
	// The tunnel closed with records still in flight: the note counts
	// those the hub received and dropped.
	var dropped int
	if _, err := fmt.Sscanf(note.GetRecord().GetSummary(), "dropped %d records", &dropped); err != nil || note.GetSource() != "hub" ||
		dropped < 1 || dropped+daemon > huge+small {
		t.Errorf("the note = %q (%s); want the hub's 'dropped N records', 0 < N <= %d", note.GetRecord().GetSummary(), note.GetSource(), huge+small-daemon)
	}
	cut := find(got, func(r *hubv1.WatchResponse) bool {
		return r.GetRecord().GetSummary() == "a 1 MB record (cut by the hub to fit its record limit)"
	})
	if cut == nil {
		t.Errorf("no 1 MB record stored cut:\n%s", lines(got))
	}
}

// Retention counts bytes: an org's records past its byte budget go, the
// oldest first, on the hub's heartbeat.
func TestActivityByteRetention(t *testing.T) {
	t.Parallel()
	const budget = 100 << 10
	hb := hubtest.Start(t, hubtest.Options{ActivityKeepBytesPerOrg: budget, Heartbeat: 50 * time.Millisecond})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	id, key := pairForger(t, h)
	f, _ := serveForger(t, h, id, key)
	const n = 30
	for i := range n {
		r := forged(uint64(i+1), "process.exit", fmt.Sprintf("record %d", i+1))
		r.Output = bytes.Repeat([]byte("x"), 10<<10) // about 13.7 KiB as JSON
		f.send(t, r)
	}
	var total int
	var seqs []uint64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		recs, err := h.store.ListActivity(t.Context(), store.ActivityQuery{OrgID: hb.Org.ID, Limit: store.MaxActivityLimit})
		if err != nil {
			t.Fatal(err)
		}
		total, seqs = 0, seqs[:0]
		for _, a := range recs {
			total += len(a.Record)
			seqs = append(seqs, a.Seq)
		}
		if len(seqs) > 0 && seqs[len(seqs)-1] == n && total <= budget {
			break
		}
	}
	if total > budget || len(seqs) == 0 || seqs[len(seqs)-1] != n || len(seqs) >= n {
		t.Errorf("stored %d bytes in records %v; want at most %d, the newest (%d) kept, the oldest gone", total, seqs, budget, n)
	}
}
