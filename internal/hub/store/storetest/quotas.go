package storetest

import (
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// What the caps and the workspace size need stored: the token a sandbox
// counts against (given at creation, or set when a warm one is claimed),
// and an environment's own workspace size.
func testQuotas(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-t1", OrgID: org.ID, Environment: "builtin", Conversation: "c-1", Image: "img", CreatedAt: T0, Token: "tok-1"}))(t)
	must(s.CreateSandbox(ctx, store.Sandbox{ID: "sb-w", OrgID: org.ID, Environment: "builtin", Warm: true, Image: "img", CreatedAt: T0}))(t)
	noErr(t, s.SetSandboxToken(ctx, "sb-w", "tok-2"))
	wantErr(t, "token of a missing sandbox", s.SetSandboxToken(ctx, "sb-none", "tok-2"), store.ErrNotFound)
	got := map[string]string{}
	for _, sb := range must(s.ListSandboxes(ctx, org.ID))(t) {
		got[sb.ID] = sb.Token
	}
	if got["sb-t1"] != "tok-1" || got["sb-w"] != "tok-2" {
		t.Errorf("tokens stored: %v; want sb-t1 tok-1, sb-w tok-2", got)
	}

	must(s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "big", Image: "ghcr.io/a/b:1", Network: "none", CreatedAt: T0, WorkspaceMax: 128 << 20}))(t)
	if e := must(s.Environment(ctx, org.ID, "big"))(t); e.WorkspaceMax != 128<<20 {
		t.Errorf("workspace size stored: %d; want %d", e.WorkspaceMax, 128<<20)
	}
	_, err := s.CreateEnvironment(ctx, store.Environment{OrgID: org.ID, Name: "neg", Image: "ghcr.io/a/b:1", Network: "none", CreatedAt: T0, WorkspaceMax: -1})
	wantErr(t, "a negative workspace size", err, store.ErrInvalid)
}
