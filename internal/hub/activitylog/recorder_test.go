package activitylog

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/wire"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// memStore is the part of the store a Recorder uses, in memory.
type memStore struct {
	mu       sync.Mutex
	machines map[string]store.Machine
	activity map[string][]store.Activity // machine -> its records
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{machines: map[string]store.Machine{}, activity: map[string][]store.Activity{}}
}

func (m *memStore) Machine(_ context.Context, id string) (store.Machine, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc, ok := m.machines[id]; ok {
		return mc, nil
	}
	return store.Machine{}, store.ErrNotFound
}

func (m *memStore) CreateMachine(_ context.Context, mc store.Machine) (store.Machine, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.machines[mc.ID]; ok {
		return store.Machine{}, store.ErrConflict
	}
	m.machines[mc.ID] = mc
	return mc, nil
}

func (m *memStore) MachineSeen(context.Context, string, time.Time, string) error { return nil }

func (m *memStore) Sandbox(context.Context, string) (store.Sandbox, error) {
	return store.Sandbox{}, store.ErrNotFound
}

func (m *memStore) AppendActivity(_ context.Context, id string, recs []store.Activity) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.activity[id] = append(m.activity[id], recs...)
	return nil
}

func (m *memStore) LastSeq(context.Context, string) (uint64, error) { return 0, nil }

func (m *memStore) records(t *testing.T, id string) []*agentdv1.ActivityRecord {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*agentdv1.ActivityRecord
	for _, a := range m.activity[id] {
		r := &agentdv1.ActivityRecord{}
		if err := protojson.Unmarshal(a.Record, r); err != nil {
			t.Fatal(err)
		}
		if a.Source != store.SourceHub || a.Seq != r.Seq {
			t.Errorf("stored %q: source %q seq %d, want the hub's, seq %d", r.Summary, a.Source, a.Seq, r.Seq)
		}
		out = append(out, r)
	}
	return out
}

func newTestRecorder(t *testing.T, st Store, now func() time.Time, pulse func()) *Recorder {
	t.Helper()
	h, err := New(Options{Store: st, Now: now, Pulse: pulse,
		Conn: func(string) (grpc.ClientConnInterface, bool) { return nil, false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); h.Wait() })
	return h
}

// The hub's own records are stored under the org's hub pseudo-machine
// (made once), numbered apart even within one microsecond, redacted as
// their subject's, and each wakes the watchers here and on other replicas.
func TestRecordHubRecords(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pulses := 0
	h := newTestRecorder(t, st, func() time.Time { return at }, func() { pulses++ })
	h.Hold("sb-one", map[string][]byte{"KEY": []byte("sk-0123456789")})

	changed := h.Changed()
	h.Record(t.Context(), "org1", "", &agentdv1.ActivityRecord{Kind: "test", Summary: "first"})
	select {
	case <-changed:
	default:
		t.Error("Changed was not closed by a stored record")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // stored even so
	h.Record(ctx, "org1", "sb-one", &agentdv1.ActivityRecord{Kind: "test", Summary: "sent sk-0123456789"})

	if _, err := st.Machine(t.Context(), "sb-hub-org1"); err != nil {
		t.Fatalf("the org's hub pseudo-machine: %v", err)
	}
	got := st.records(t, "sb-hub-org1")
	if len(got) != 2 {
		t.Fatalf("stored %d records, want 2", len(got))
	}
	if got[0].Seq != uint64(at.UnixMicro()) || got[1].Seq != got[0].Seq+1 {
		t.Errorf("sequence numbers %d, %d: want %d and one past it", got[0].Seq, got[1].Seq, at.UnixMicro())
	}
	if got[1].Summary != "sent [secret KEY]" {
		t.Errorf("the sandbox's record: %q, want its secret redacted", got[1].Summary)
	}
	if pulses != 2 {
		t.Errorf("%d pulses to other replicas, want 2", pulses)
	}
}

// A routed call's record is stored by the writer, also when the recorder
// closes right after (the queue is stored first), with a domain error as
// the caller gets it.
func TestRecordCallOnClose(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	h, err := New(Options{Store: st, Conn: func(string) (grpc.ClientConnInterface, bool) { return nil, false }})
	if err != nil {
		t.Fatal(err)
	}
	c := h.NewCall("org1", "tester", "agentctl", "conv", "", "m-1", "/agentd.v1.FileService/Read")
	c.Finish(errs.New(errs.Unavailable, "machine m-1 is offline"))
	h.Close()
	h.Wait()
	got := st.records(t, "sb-hub-org1")
	if len(got) != 1 {
		t.Fatalf("stored %d records, want 1", len(got))
	}
	r := got[0]
	if r.Kind != wire.KindCall || r.Actor != "tester" || r.Client != "agentctl" || r.Outcome != agentdv1.Outcome_OUTCOME_ERROR ||
		r.Error != "Unavailable: machine m-1 is offline" || r.Summary != "called FileService/Read: machine m-1 is offline" {
		t.Errorf("the call's record: %v", r)
	}
}

// New refuses options without a store or a way to the tunnels.
func TestRecorderOptionsRequired(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); errs.KindOf(err) != errs.Invalid {
		t.Errorf("New without a store: %v, want an Invalid error", err)
	}
}

func TestHeadTail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789abcdefghij", 10, "01234\n[… 10 bytes …]\nfghij"},
		{"0123456789abcdefghij", 5, "01\n[… 15 bytes …]\nhij"},
	} {
		if got := string(headTail([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("headTail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	if got := joinHeadTail([]byte("ab"), []byte("cd"), 0); string(got) != "abcd" {
		t.Errorf("nothing omitted: %q, want no mark", got)
	}
}
