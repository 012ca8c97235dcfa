package storetest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// A sandbox's machine keeps the sb-… id the hub gives it; any other id
// given is replaced by an m-… one.
func testSandboxMachine(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	key := func() ed25519.PublicKey {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return pub
	}
	m := must(s.CreateMachine(ctx, store.Machine{ID: "sb-abc", OrgID: org.ID, Name: "sb-abc", PublicKey: key(), CreatedAt: T0}))(t)
	if m.ID != "sb-abc" {
		t.Errorf("sandbox machine id %q, want sb-abc", m.ID)
	}
	got := must(s.Machine(ctx, "sb-abc"))(t)
	if got.OrgID != org.ID {
		t.Errorf("machine org %q, want %q", got.OrgID, org.ID)
	}
	_, err := s.CreateMachine(ctx, store.Machine{ID: "sb-abc", OrgID: org.ID, PublicKey: key(), CreatedAt: T0})
	wantErr(t, "same sandbox id twice", err, store.ErrConflict)
	m = must(s.CreateMachine(ctx, store.Machine{ID: "x-1", OrgID: org.ID, PublicKey: key(), CreatedAt: T0}))(t)
	if len(m.ID) < 3 || m.ID[:2] != "m-" {
		t.Errorf("machine id %q, want an m-… id", m.ID)
	}
}

func testEnvironments(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	other := must(s.CreateOrg(ctx, "other", T0))(t)

	e := must(s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "py", Image: "ghcr.io/acme/py:1", Network: "public", CreatedAt: T0}))(t)
	want := store.Environment{OrgID: org.ID, Name: "py", Image: "ghcr.io/acme/py:1", Network: "public", State: store.EnvValidating,
		Running: "create", Generation: 1, CreatedAt: T0, UpdatedAt: T0, Isolation: "runc"}
	if diff := cmp.Diff(e, want); diff != "" {
		t.Errorf("created (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.Environment(ctx, org.ID, "py"))(t), want); diff != "" {
		t.Errorf("read back (-got +want):\n%s", diff)
	}
	_, err := s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "py", Image: "ghcr.io/acme/py:2", Network: "public", CreatedAt: T0})
	wantErr(t, "same name twice", err, store.ErrConflict)
	_, err = s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "bad", Image: "x", Network: "lan", CreatedAt: T0})
	wantErr(t, "bad network", err, store.ErrInvalid)
	_, err = s.Environment(ctx, other.ID, "py")
	wantErr(t, "another org's environment", err, store.ErrNotFound)
	must(s.CreateEnvironment(ctx, store.Environment{OrgID: other.ID, Name: "py", Image: "ghcr.io/other/py:1", Network: "none", CreatedAt: T0}))(t)

	// A second start while the first runs is refused and changes nothing.
	_, err = s.StartValidation(ctx, org.ID, "py", "update", T0.Add(time.Second))
	wantErr(t, "update while creating", err, store.ErrPrecondition)

	// Progress, then the outcome; only the current generation may write.
	noErr(t, s.SetValidationReason(ctx, org.ID, "py", 1, "pulling", T0.Add(time.Second)))
	wantErr(t, "stale progress", s.SetValidationReason(ctx, org.ID, "py", 7, "x", T0), store.ErrPrecondition)
	report := json.RawMessage(`[{"id":"a","status":"pass"}]`)
	done := must(s.FinishValidation(ctx, org.ID, "py", 1, store.Environment{State: store.EnvReady, Pinned: "ghcr.io/acme/py@sha256:aa", Report: report,
		Inventory: json.RawMessage(`{"tools":["az"]}`)}, T0.Add(2*time.Second)))(t)
	if done.State != store.EnvReady || done.Pinned != "ghcr.io/acme/py@sha256:aa" || done.Running != "" || string(done.Report) != string(report) {
		t.Errorf("finished: %+v", done)
	}
	_, err = s.FinishValidation(ctx, org.ID, "py", 1, store.Environment{State: store.EnvRejected}, T0.Add(3*time.Second))
	wantErr(t, "finish twice", err, store.ErrPrecondition)

	// Revalidate keeps pin, state and report until it finishes.
	rv := must(s.StartValidation(ctx, org.ID, "py", "revalidate", T0.Add(4*time.Second)))(t)
	if rv.State != store.EnvReady || rv.Pinned == "" || rv.Running != "revalidate" || rv.Generation != 2 {
		t.Errorf("revalidating: %+v", rv)
	}
	if got := must(s.Environment(ctx, org.ID, "py"))(t); string(got.Report) != string(report) || got.Pinned != rv.Pinned {
		t.Errorf("revalidating lost the report or pin: %+v", got)
	}
	must(s.FinishValidation(ctx, org.ID, "py", 2, store.Environment{State: store.EnvRejected, Reason: "python3 gone", Report: report}, T0.Add(5*time.Second)))(t)

	// Update lets go of the pin at once.
	up := must(s.StartValidation(ctx, org.ID, "py", "update", T0.Add(6*time.Second)))(t)
	if up.State != store.EnvValidating || up.Pinned != "" || up.Report != nil || up.Generation != 3 {
		t.Errorf("updating: %+v", up)
	}
	if got := must(s.ListValidating(ctx))(t); len(got) != 2 || got[0].Running == "" {
		t.Errorf("validating: %d environments, want 2 (py of acme, py of other)", len(got))
	}
	_, err = s.StartValidation(ctx, org.ID, "py", "rebuild", T0)
	wantErr(t, "unknown kind", err, store.ErrInvalid)

	// Isolation: per environment, and per org for the built-in one.
	_, err = s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "vm", Image: "x", Network: "none", Isolation: "kata", CreatedAt: T0})
	wantErr(t, "bad isolation", err, store.ErrInvalid)
	gv := must(s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "gv", Image: "x", Network: "none", Isolation: "gvisor", CreatedAt: T0}))(t)
	if gv.Isolation != "gvisor" || must(s.Environment(ctx, org.ID, "gv"))(t).Isolation != "gvisor" {
		t.Errorf("created with gvisor: %+v", gv)
	}
	set := must(s.SetEnvironmentIsolation(ctx, org.ID, "gv", "runc", T0.Add(time.Minute)))(t)
	if set.Isolation != "runc" || !set.UpdatedAt.Equal(T0.Add(time.Minute)) || must(s.Environment(ctx, org.ID, "gv"))(t).Isolation != "runc" {
		t.Errorf("set to runc: %+v", set)
	}
	_, err = s.SetEnvironmentIsolation(ctx, org.ID, "gv", "kata", T0)
	wantErr(t, "set a bad isolation", err, store.ErrInvalid)
	_, err = s.SetEnvironmentIsolation(ctx, other.ID, "gv", "gvisor", T0)
	wantErr(t, "set another org's", err, store.ErrNotFound)
	if iso := must(s.BuiltinIsolation(ctx, org.ID))(t); iso != "runc" {
		t.Errorf("builtin isolation %q before any was set, want runc", iso)
	}
	noErr(t, s.SetBuiltinIsolation(ctx, org.ID, "gvisor"))
	noErr(t, s.SetBuiltinIsolation(ctx, org.ID, "gvisor"))
	if iso := must(s.BuiltinIsolation(ctx, org.ID))(t); iso != "gvisor" {
		t.Errorf("builtin isolation %q, want gvisor", iso)
	}
	if iso := must(s.BuiltinIsolation(ctx, other.ID))(t); iso != "runc" {
		t.Errorf("other org's builtin isolation %q, want runc", iso)
	}
	wantErr(t, "builtin bad isolation", s.SetBuiltinIsolation(ctx, org.ID, "kata"), store.ErrInvalid)
	noErr(t, s.DeleteEnvironment(ctx, org.ID, "gv"))

	// Defaults.
	if d := must(s.DefaultEnvironment(ctx, org.ID))(t); d != "" {
		t.Errorf("default %q before any was set", d)
	}
	noErr(t, s.SetDefaultEnvironment(ctx, org.ID, "py"))
	noErr(t, s.SetDefaultEnvironment(ctx, org.ID, "py"))
	if d := must(s.DefaultEnvironment(ctx, org.ID))(t); d != "py" {
		t.Errorf("default %q, want py", d)
	}
	if d := must(s.DefaultEnvironment(ctx, other.ID))(t); d != "" {
		t.Errorf("other org's default %q", d)
	}
	noErr(t, s.DeleteEnvironment(ctx, org.ID, "py"))
	if d := must(s.DefaultEnvironment(ctx, org.ID))(t); d != "" {
		t.Errorf("default %q after its environment was deleted", d)
	}
	wantErr(t, "delete twice", s.DeleteEnvironment(ctx, org.ID, "py"), store.ErrNotFound)
	if got := must(s.ListEnvironments(ctx, other.ID))(t); len(got) != 1 {
		t.Errorf("other org lost its environment: %+v", got)
	}
}

// Of several concurrent updates of one environment exactly one starts.
func testValidationRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	must(s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "py", Image: "ghcr.io/acme/py:1", Network: "public", CreatedAt: T0}))(t)
	must(s.FinishValidation(ctx, org.ID, "py", 1, store.Environment{State: store.EnvReady, Pinned: "ghcr.io/acme/py@sha256:aa"}, T0))(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.StartValidation(ctx, org.ID, "py", "update", T0.Add(time.Second))
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrPrecondition):
			t.Errorf("a losing update: %v, want ErrPrecondition", err)
		}
	}
	if won != 1 {
		t.Errorf("%d updates started, want exactly 1", won)
	}
}

func testSandboxes(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	other := must(s.CreateOrg(ctx, "other", T0))(t)
	sb := must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-1", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0}))(t)
	if sb.LastUsedAt != T0 || sb.Warm {
		t.Errorf("created %+v", sb)
	}
	_, err := s.CreateSandbox(ctx, store.Sandbox{ID: "sb-2", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0})
	wantErr(t, "second sandbox for one conversation", err, store.ErrConflict)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-3", OrgID: other.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0}))(t)
	_, err = s.CreateSandbox(ctx, store.Sandbox{ID: "sb-4", OrgID: org.ID, Environment: "builtin", Conversation: "c-9", Warm: true, Image: "img", CreatedAt: T0})
	wantErr(t, "warm with a conversation", err, store.ErrInvalid)

	// An end fixed at creation (an agent run's TTL) is kept; it must come
	// after the creation, and a warm sandbox has none.
	run := must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-run", OrgID: org.ID, Environment: "agent:codex", Conversation: "run-1", Image: "img",
		CreatedAt: T0, ExpiresAt: T0.Add(2 * time.Hour), Token: "tok-1", HoldsSecrets: true}))(t)
	if got := must(s.Sandbox(ctx, run.ID))(t); !got.ExpiresAt.Equal(T0.Add(2*time.Hour)) || !sb.ExpiresAt.IsZero() {
		t.Errorf("expiry stored %v (want %v); a sandbox without one has %v", got.ExpiresAt, T0.Add(2*time.Hour), sb.ExpiresAt)
	}
	// Who started a run and whether it holds secrets are kept: the hub's
	// access rule reads them on every call, across restarts and replicas.
	if got := must(s.Sandbox(ctx, run.ID))(t); got.Token != "tok-1" || !got.HoldsSecrets || sb.HoldsSecrets {
		t.Errorf("run stored token %q, holds_secrets %v (want tok-1, true); a conversation's holds_secrets: %v", got.Token, got.HoldsSecrets, sb.HoldsSecrets)
	}
	_, err = s.CreateSandbox(ctx, store.Sandbox{ID: "sb-5", OrgID: org.ID, Environment: "agent:codex", Conversation: "run-2", Image: "img", CreatedAt: T0, ExpiresAt: T0})
	wantErr(t, "an end at the creation", err, store.ErrInvalid)
	_, err = s.CreateSandbox(ctx, store.Sandbox{ID: "sb-6", OrgID: org.ID, Environment: "builtin", Warm: true, Image: "img", CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)})
	wantErr(t, "a warm sandbox with an end", err, store.ErrInvalid)
	noErr(t, s.DeleteSandbox(ctx, run.ID))

	// Warm ones: two of hub h1, only one with a container, and one of
	// another hub; claimed oldest first, once, by their own hub only.
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-w1", OrgID: org.ID, Environment: "builtin", Warm: true, Image: "img", Hub: "h1", CreatedAt: T0}))(t)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-w2", OrgID: org.ID, Environment: "builtin", Warm: true, Image: "img", Hub: "h1", CreatedAt: T0.Add(time.Second)}))(t)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-w0", OrgID: org.ID, Environment: "builtin", Warm: true, Image: "img", Hub: "h2", CreatedAt: T0.Add(-time.Second)}))(t)
	_, err = s.ClaimWarmSandbox(ctx, org.ID, "builtin", "h1", "c-2", T0.Add(time.Minute))
	wantErr(t, "claim before any container is set", err, store.ErrNotFound)
	noErr(t, s.SetSandboxContainer(ctx, "sb-w1", "ctr-1"))
	noErr(t, s.SetSandboxContainer(ctx, "sb-w2", "ctr-2"))
	noErr(t, s.SetSandboxContainer(ctx, "sb-w0", "ctr-0"))
	_, err = s.ClaimWarmSandbox(ctx, org.ID, "builtin", "h1", "c-1", T0.Add(time.Minute))
	wantErr(t, "claim for a conversation that has one", err, store.ErrConflict)
	got := must(s.ClaimWarmSandbox(ctx, org.ID, "builtin", "h1", "c-2", T0.Add(time.Minute)))(t)
	if got.ID != "sb-w1" || got.Conversation != "c-2" || got.Warm || got.ContainerID != "ctr-1" || got.Hub != "h1" {
		t.Errorf("claimed %+v, want sb-w1 of h1 for c-2 (not h2's older sb-w0)", got)
	}
	if c := must(s.ConversationSandbox(ctx, org.ID, "builtin", "c-2"))(t); c.ID != "sb-w1" {
		t.Errorf("conversation c-2 has %s", c.ID)
	}
	if got := must(s.ClaimWarmSandbox(ctx, org.ID, "builtin", "h1", "c-3", T0.Add(time.Minute)))(t); got.ID != "sb-w2" {
		t.Errorf("second claim got %s, want sb-w2", got.ID)
	}
	_, err = s.ClaimWarmSandbox(ctx, org.ID, "builtin", "h1", "c-4", T0.Add(time.Minute))
	wantErr(t, "claim with h1's pool empty (h2's is not h1's)", err, store.ErrNotFound)
	if got := must(s.ClaimWarmSandbox(ctx, org.ID, "builtin", "h2", "c-4", T0.Add(time.Minute)))(t); got.ID != "sb-w0" {
		t.Errorf("h2's claim got %s, want sb-w0", got.ID)
	}

	noErr(t, s.TouchSandbox(ctx, "sb-1", T0.Add(time.Hour)))
	noErr(t, s.TouchSandbox(ctx, "sb-1", T0))
	if got := must(s.Sandbox(ctx, "sb-1"))(t); !got.LastUsedAt.Equal(T0.Add(time.Hour)) {
		t.Errorf("last used %v, want %v (never moves back)", got.LastUsedAt, T0.Add(time.Hour))
	}
	if n := len(must(s.ListSandboxes(ctx, org.ID))(t)); n != 4 {
		t.Errorf("org has %d sandboxes, want 4", n)
	}
	if n := len(must(s.ListSandboxes(ctx, ""))(t)); n != 5 {
		t.Errorf("hub has %d sandboxes, want 5", n)
	}
	noErr(t, s.DeleteSandbox(ctx, "sb-1"))
	noErr(t, s.DeleteSandbox(ctx, "sb-1"))
	_, err = s.Sandbox(ctx, "sb-1")
	wantErr(t, "deleted sandbox", err, store.ErrNotFound)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-5", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0}))(t)
}
