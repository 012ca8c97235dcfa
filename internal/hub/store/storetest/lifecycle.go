package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// A sandbox is running when made, and keeps the state (with its time and
// reason) it is set to; another state is refused and changes nothing.
func testSandboxStates(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	sb := must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-s1", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0}))(t)
	if sb.State != store.SandboxRunning {
		t.Errorf("CreateSandbox: state %q, want running", sb.State)
	}
	if got := must(s.Sandbox(ctx, "sb-s1"))(t); got.State != store.SandboxRunning || !got.StateAt.IsZero() || got.StateReason != "" {
		t.Errorf("a new sandbox: state %q at %v for %q, want running, zero time, no reason", got.State, got.StateAt, got.StateReason)
	}
	at := T0.Add(5 * time.Minute)
	for _, st := range []string{store.SandboxPaused, store.SandboxStopped, store.SandboxRunning} {
		noErr(t, s.SetSandboxState(ctx, "sb-s1", st, at, "idle "+st))
		got := must(s.ConversationSandbox(ctx, org.ID, "builtin", "c-1"))(t)
		if got.State != st || !got.StateAt.Equal(at) || got.StateReason != "idle "+st {
			t.Errorf("after SetSandboxState(%s): state %q at %v for %q", st, got.State, got.StateAt, got.StateReason)
		}
		at = at.Add(time.Minute)
	}
	if got := must(s.Sandbox(ctx, "sb-s1"))(t); got.WorkspaceBytes != -1 || !got.WorkspaceAt.IsZero() {
		t.Errorf("workspace of a sandbox never measured: %d at %v, want -1, zero", got.WorkspaceBytes, got.WorkspaceAt)
	}
	noErr(t, s.SetSandboxWorkspace(ctx, "sb-s1", 3<<20, at))
	if got := must(s.Sandbox(ctx, "sb-s1"))(t); got.WorkspaceBytes != 3<<20 || !got.WorkspaceAt.Equal(at) {
		t.Errorf("workspace measured: %d at %v, want %d at %v", got.WorkspaceBytes, got.WorkspaceAt, 3<<20, at)
	}
	wantErr(t, "a negative workspace size", s.SetSandboxWorkspace(ctx, "sb-s1", -5, at), store.ErrInvalid)
	wantErr(t, "workspace of a missing sandbox", s.SetSandboxWorkspace(ctx, "sb-none", 1, at), store.ErrNotFound)
	wantErr(t, "an unknown state", s.SetSandboxState(ctx, "sb-s1", "frozen", at, ""), store.ErrInvalid)
	wantErr(t, "state of a missing sandbox", s.SetSandboxState(ctx, "sb-none", store.SandboxPaused, at, ""), store.ErrNotFound)
	if got := must(s.ListSandboxes(ctx, org.ID))(t); len(got) != 1 || got[0].State != store.SandboxRunning {
		t.Errorf("ListSandboxes after a refused state: %+v, want one running", got)
	}
}

// An environment's policy is stored per org and name (builtin included),
// reset by the zero Policy, and deleted with its environment.
func testSandboxPolicies(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	other := must(s.CreateOrg(ctx, "other", T0))(t)
	if got := must(s.SandboxPolicy(ctx, org.ID, "builtin"))(t); got != (store.Policy{}) {
		t.Errorf("policy never set: %+v, want zero", got)
	}
	want := store.Policy{PauseAfter: 90 * time.Second, StopAfter: time.Hour, ArchiveAfter: 7 * 24 * time.Hour, DeleteAfter: store.Never}
	noErr(t, s.SetSandboxPolicy(ctx, org.ID, "builtin", want))
	if diff := cmp.Diff(must(s.SandboxPolicy(ctx, org.ID, "builtin"))(t), want); diff != "" {
		t.Errorf("policy stored (-got +want):\n%s", diff)
	}
	if got := must(s.SandboxPolicy(ctx, other.ID, "builtin"))(t); got != (store.Policy{}) {
		t.Errorf("another org's policy: %+v, want zero", got)
	}
	want.DeleteAfter = 48 * time.Hour
	noErr(t, s.SetSandboxPolicy(ctx, org.ID, "builtin", want))
	if diff := cmp.Diff(must(s.SandboxPolicy(ctx, org.ID, "builtin"))(t), want); diff != "" {
		t.Errorf("policy set again (-got +want):\n%s", diff)
	}
	wantErr(t, "a duration below never", s.SetSandboxPolicy(ctx, org.ID, "builtin", store.Policy{StopAfter: -2}), store.ErrInvalid)
	if diff := cmp.Diff(must(s.SandboxPolicy(ctx, org.ID, "builtin"))(t), want); diff != "" {
		t.Errorf("policy after a refused one (-got +want):\n%s", diff)
	}
	noErr(t, s.SetSandboxPolicy(ctx, org.ID, "builtin", store.Policy{}))
	if got := must(s.SandboxPolicy(ctx, org.ID, "builtin"))(t); got != (store.Policy{}) {
		t.Errorf("policy reset: %+v, want zero", got)
	}

	must(s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "py", Image: "ghcr.io/a/b:1", Network: "none", CreatedAt: T0}))(t)
	noErr(t, s.SetSandboxPolicy(ctx, org.ID, "py", store.Policy{StopAfter: time.Minute}))
	noErr(t, s.DeleteEnvironment(ctx, org.ID, "py"))
	if got := must(s.SandboxPolicy(ctx, org.ID, "py"))(t); got != (store.Policy{}) {
		t.Errorf("policy of a deleted environment: %+v, want zero", got)
	}
}

// A stopped sandbox is archived in one step (state, archive id, no
// container), and only a stopped one; an archived one is restored into a
// new container in one step, and only an archived one. The row keeps its
// id and conversation throughout.
func testSandboxArchive(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-a1", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0}))(t)
	noErr(t, s.SetSandboxContainer(ctx, "sb-a1", "c0ffee"))
	at := T0.Add(time.Hour)
	wantErr(t, "archive a running sandbox", s.ArchiveSandbox(ctx, "sb-a1", "20250101-abc", at, "idle 7d"), store.ErrConflict)
	wantErr(t, "archive a missing sandbox", s.ArchiveSandbox(ctx, "sb-none", "20250101-abc", at, ""), store.ErrNotFound)
	wantErr(t, "archive without an archive id", s.ArchiveSandbox(ctx, "sb-a1", "", at, ""), store.ErrInvalid)
	wantErr(t, "restore a running sandbox", s.UnarchiveSandbox(ctx, "sb-a1", "beef", "img2", at), store.ErrConflict)
	noErr(t, s.SetSandboxState(ctx, "sb-a1", store.SandboxStopped, at, "idle 30m"))
	noErr(t, s.ArchiveSandbox(ctx, "sb-a1", "20250101-abc", at, "idle 7d"))
	got := must(s.ConversationSandbox(ctx, org.ID, "builtin", "c-1"))(t)
	if got.ID != "sb-a1" || got.State != store.SandboxArchived || got.ArchiveID != "20250101-abc" || got.ContainerID != "" ||
		!got.StateAt.Equal(at) || got.StateReason != "idle 7d" {
		t.Errorf("archived: %+v", got)
	}
	wantErr(t, "archive an archived sandbox", s.ArchiveSandbox(ctx, "sb-a1", "20250101-def", at, ""), store.ErrConflict)
	wantErr(t, "restore without a container", s.UnarchiveSandbox(ctx, "sb-a1", "", "img2", at), store.ErrInvalid)
	noErr(t, s.UnarchiveSandbox(ctx, "sb-a1", "beef", "img2", at.Add(time.Minute)))
	got = must(s.ConversationSandbox(ctx, org.ID, "builtin", "c-1"))(t)
	if got.ID != "sb-a1" || got.State != store.SandboxRunning || got.ArchiveID != "" || got.ContainerID != "beef" || got.Image != "img2" || got.StateReason != "" {
		t.Errorf("restored: %+v", got)
	}
}
