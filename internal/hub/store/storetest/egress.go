package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// A sandbox's allow list starts at generation 1; a change moves it on by
// one and, when it cuts, sets CutGen to the new generation; a change from
// a generation that is no longer current is ErrConflict and changes
// nothing; the list goes with its sandbox. An environment's list is per
// org and name, cleared by an empty one, and goes with its environment.
func testEgressLists(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-e1", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0}))(t)
	wantErr(t, "list of a sandbox without one", second(s.SandboxEgress(ctx, "sb-e1")), store.ErrNotFound)
	wantErr(t, "list of a missing sandbox", second(s.CreateSandboxEgress(ctx, "sb-none", []string{"a.example.com:443"}, T0)), store.ErrNotFound)

	got := must(s.CreateSandboxEgress(ctx, "sb-e1", []string{"a.example.com:443", "b.example.com:80"}, T0))(t)
	want := store.SandboxEgress{Allow: []string{"a.example.com:443", "b.example.com:80"}, Gen: 1, ChangedAt: T0}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("CreateSandboxEgress (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.SandboxEgress(ctx, "sb-e1"))(t), want); diff != "" {
		t.Errorf("SandboxEgress (-got +want):\n%s", diff)
	}
	wantErr(t, "a second list", second(s.CreateSandboxEgress(ctx, "sb-e1", nil, T0)), store.ErrConflict)

	t1 := T0.Add(time.Minute)
	got = must(s.ChangeSandboxEgress(ctx, "sb-e1", 1, []string{"b.example.com:80"}, false, t1))(t)
	want = store.SandboxEgress{Allow: []string{"b.example.com:80"}, Gen: 2, ChangedAt: t1}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("a change (-got +want):\n%s", diff)
	}
	wantErr(t, "a change from an old generation", second(s.ChangeSandboxEgress(ctx, "sb-e1", 1, nil, true, t1)), store.ErrConflict)
	got = must(s.ChangeSandboxEgress(ctx, "sb-e1", 2, []string{}, true, t1))(t)
	want = store.SandboxEgress{Allow: []string{}, Gen: 3, CutGen: 3, ChangedAt: t1}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("a cutting change to nothing (-got +want):\n%s", diff)
	}
	got = must(s.ChangeSandboxEgress(ctx, "sb-e1", 3, []string{"c.example.com:443"}, false, t1))(t)
	if got.Gen != 4 || got.CutGen != 3 {
		t.Errorf("a change after a cut: gen %d cut %d, want 4 and 3", got.Gen, got.CutGen)
	}
	wantErr(t, "a change of a sandbox without a list", second(s.ChangeSandboxEgress(ctx, "sb-none", 1, nil, false, t1)), store.ErrNotFound)
	noErr(t, s.DeleteSandbox(ctx, "sb-e1"))
	wantErr(t, "list of a deleted sandbox", second(s.SandboxEgress(ctx, "sb-e1")), store.ErrNotFound)

	if got := must(s.EnvironmentAllow(ctx, org.ID, "py"))(t); got != nil {
		t.Errorf("environment list never set: %q, want nil", got)
	}
	must(s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "py", Image: "ghcr.io/acme/py:1", Network: "public", CreatedAt: T0}))(t)
	noErr(t, s.SetEnvironmentAllow(ctx, org.ID, "py", []string{"pypi.org:443"}))
	noErr(t, s.SetEnvironmentAllow(ctx, org.ID, "builtin", []string{"a.example.com:443", "*.example.org:443"}))
	if diff := cmp.Diff(must(s.EnvironmentAllow(ctx, org.ID, "builtin"))(t), []string{"a.example.com:443", "*.example.org:443"}); diff != "" {
		t.Errorf("builtin's list (-got +want):\n%s", diff)
	}
	noErr(t, s.SetEnvironmentAllow(ctx, org.ID, "builtin", nil))
	if got := must(s.EnvironmentAllow(ctx, org.ID, "builtin"))(t); got != nil {
		t.Errorf("a cleared list: %q, want nil", got)
	}
	wantErr(t, "a list of a missing org", s.SetEnvironmentAllow(ctx, "org-none", "py", []string{"x.example.com:443"}), store.ErrNotFound)
	noErr(t, s.DeleteEnvironment(ctx, org.ID, "py"))
	if got := must(s.EnvironmentAllow(ctx, org.ID, "py"))(t); got != nil {
		t.Errorf("list of a deleted environment: %q, want nil", got)
	}
}
