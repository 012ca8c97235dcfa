package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// The processes a lifecycle step ended: listed ones are replaced by the
// next list, ended ones stay (with when and why) and are not ended twice;
// a resume's empty list drops the listed ones; a missing sandbox is
// ErrNotFound; the records go with their sandbox.
func testSandboxProcesses(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-p1", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0}))(t)
	wantErr(t, "processes of a missing sandbox", s.SetSandboxProcesses(ctx, "sb-none", []store.SandboxProcess{{ID: "p-1", Info: []byte(`{}`)}}), store.ErrNotFound)
	wantErr(t, "a process without an id", s.SetSandboxProcesses(ctx, "sb-p1", []store.SandboxProcess{{Info: []byte(`{}`)}}), store.ErrInvalid)

	noErr(t, s.SetSandboxProcesses(ctx, "sb-p1", []store.SandboxProcess{{ID: "p-1", Info: []byte(`{"id":"p-1"}`)}, {ID: "p-2", Info: []byte(`{"id":"p-2"}`)}}))
	noErr(t, s.SetSandboxProcesses(ctx, "sb-p1", []store.SandboxProcess{{ID: "p-2", Info: []byte(`{"id":"p-2"}`)}, {ID: "p-3", Info: []byte(`{"id":"p-3"}`)}}))
	t1 := T0.Add(time.Hour)
	got := must(s.EndSandboxProcesses(ctx, "sb-p1", "sandbox stopped: idle 30m", t1))(t)
	want := []store.SandboxProcess{
		{SandboxID: "sb-p1", ID: "p-2", Info: []byte(`{"id":"p-2"}`), EndedAt: t1, Reason: "sandbox stopped: idle 30m"},
		{SandboxID: "sb-p1", ID: "p-3", Info: []byte(`{"id":"p-3"}`), EndedAt: t1, Reason: "sandbox stopped: idle 30m"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("EndSandboxProcesses (-got +want):\n%s", diff)
	}
	if got := must(s.EndSandboxProcesses(ctx, "sb-p1", "sandbox archived: idle 7d", t1.Add(time.Minute)))(t); len(got) != 0 {
		t.Errorf("a second end ended %v again", got)
	}
	// Listed at a pause, then the resume drops them: only ended ones stay.
	noErr(t, s.SetSandboxProcesses(ctx, "sb-p1", []store.SandboxProcess{{ID: "p-2", Info: []byte(`{"id":"p-2","again":true}`)}, {ID: "p-4", Info: []byte(`{"id":"p-4"}`)}}))
	all := must(s.SandboxProcesses(ctx, "sb-p1"))(t)
	want = append(want, store.SandboxProcess{SandboxID: "sb-p1", ID: "p-4", Info: []byte(`{"id":"p-4"}`)})
	if diff := cmp.Diff(all, want); diff != "" {
		t.Errorf("SandboxProcesses with one listed (-got +want):\n%s", diff)
	}
	noErr(t, s.SetSandboxProcesses(ctx, "sb-p1", nil))
	if diff := cmp.Diff(must(s.SandboxProcesses(ctx, "sb-p1"))(t), want[:2]); diff != "" {
		t.Errorf("SandboxProcesses after a resume (-got +want):\n%s", diff)
	}
	// A week later the old records go.
	noErr(t, s.SetSandboxProcesses(ctx, "sb-p1", []store.SandboxProcess{{ID: "p-5", Info: []byte(`{}`)}}))
	t2 := t1.Add(8 * 24 * time.Hour)
	must(s.EndSandboxProcesses(ctx, "sb-p1", "sandbox stopped by alice", t2))(t)
	if diff := cmp.Diff(must(s.SandboxProcesses(ctx, "sb-p1"))(t), []store.SandboxProcess{{SandboxID: "sb-p1", ID: "p-5", Info: []byte(`{}`), EndedAt: t2, Reason: "sandbox stopped by alice"}}); diff != "" {
		t.Errorf("SandboxProcesses a week on (-got +want):\n%s", diff)
	}
	noErr(t, s.DeleteSandbox(ctx, "sb-p1"))
	if got := must(s.SandboxProcesses(ctx, "sb-p1"))(t); len(got) != 0 {
		t.Errorf("records of a deleted sandbox: %v", got)
	}
}

// A lease has one holder at a time: another holder gets it only once it
// expired or was released; the holder extends its own; of many holders
// racing for a free lease, one wins.
func testLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	ttl := time.Minute
	if ok := must(s.AcquireLease(ctx, "gc", "r1", T0, ttl))(t); !ok {
		t.Fatal("a free lease was not acquired")
	}
	if ok := must(s.AcquireLease(ctx, "gc", "r2", T0.Add(30*time.Second), ttl))(t); ok {
		t.Error("r2 acquired r1's lease before it expired")
	}
	if ok := must(s.AcquireLease(ctx, "other", "r2", T0, ttl))(t); !ok {
		t.Error("another lease's name was not free")
	}
	if ok := must(s.AcquireLease(ctx, "gc", "r1", T0.Add(50*time.Second), ttl))(t); !ok {
		t.Error("r1 could not extend its own lease")
	}
	if ok := must(s.AcquireLease(ctx, "gc", "r2", T0.Add(70*time.Second), ttl))(t); ok {
		t.Error("r2 acquired r1's extended lease before it expired")
	}
	noErr(t, s.ReleaseLease(ctx, "gc", "r2")) // not its own: changes nothing
	if ok := must(s.AcquireLease(ctx, "gc", "r2", T0.Add(80*time.Second), ttl))(t); ok {
		t.Error("r2's release freed r1's lease")
	}
	if ok := must(s.AcquireLease(ctx, "gc", "r2", T0.Add(111*time.Second), ttl))(t); !ok {
		t.Error("r2 could not take r1's expired lease")
	}
	noErr(t, s.ReleaseLease(ctx, "gc", "r2"))
	wantErr(t, "a lease without a holder", second(s.AcquireLease(ctx, "gc", "", T0, ttl)), store.ErrInvalid)

	// Racing for a free lease: exactly one wins.
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	at := T0.Add(time.Hour)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.AcquireLease(ctx, "race", "r"+string(rune('a'+i)), at, ttl)
			if err != nil {
				t.Errorf("racing for a lease: %v", err)
				return
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d of %d racing holders acquired one lease, want 1", wins, n)
	}
}
