package storetest

import (
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Exposures: stored with an id, found by token while live, listed per
// org and machine, gone once revoked or expired; bad input changes
// nothing.
func testExposures(t *testing.T, s store.Store) {
	ctx := t.Context()
	org := must(s.CreateOrg(ctx, "acme", T0))(t)
	other := must(s.CreateOrg(ctx, "beta", T0))(t)
	m := must(s.CreateMachine(ctx, store.Machine{ID: "sb-exp", OrgID: org.ID, Name: "sb-exp", PublicKey: NewKey(t), CreatedAt: T0}))(t)
	tok := func(s string) store.TokenHash { return store.HashToken(s) }

	e := must(s.CreateExposure(ctx, store.Exposure{OrgID: org.ID, MachineID: m.ID, Port: 8000, Access: store.AccessPublic,
		TokenHash: tok("a"), CreatedBy: "t-1", CreatedName: "alice", CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}))(t)
	if len(e.ID) < 4 || e.ID[:3] != "px-" {
		t.Errorf("exposure id %q, want px-…", e.ID)
	}
	forever := must(s.CreateExposure(ctx, store.Exposure{OrgID: org.ID, MachineID: m.ID, Port: 9000, Access: store.AccessPrivate,
		TokenHash: tok("b"), CreatedBy: "t-1", CreatedName: "alice", CreatedAt: T0.Add(time.Second)}))(t)

	got := must(s.ExposureByToken(ctx, tok("a"), T0.Add(time.Minute)))(t)
	if got.ID != e.ID || got.Port != 8000 || got.Access != store.AccessPublic || got.MachineID != m.ID || got.CreatedBy != "t-1" ||
		got.CreatedName != "alice" || !got.CreatedAt.Equal(T0) || !got.ExpiresAt.Equal(T0.Add(time.Hour)) || !got.RevokedAt.IsZero() {
		t.Errorf("by token: %+v", got)
	}
	_, err := s.ExposureByToken(ctx, tok("a"), T0.Add(time.Hour))
	wantErr(t, "expired exposure", err, store.ErrNotFound)
	_, err = s.ExposureByToken(ctx, tok("nope"), T0)
	wantErr(t, "unknown token", err, store.ErrNotFound)
	if got := must(s.ExposureByToken(ctx, tok("b"), T0.Add(1000*time.Hour)))(t); got.ID != forever.ID || !got.ExpiresAt.IsZero() {
		t.Errorf("no expiry: %+v", got)
	}

	list := must(s.ListExposures(ctx, org.ID, "", T0.Add(time.Minute)))(t)
	if len(list) != 2 || list[0].ID != e.ID || list[1].ID != forever.ID {
		t.Errorf("list: %+v", list)
	}
	if list := must(s.ListExposures(ctx, org.ID, m.ID, T0.Add(2*time.Hour)))(t); len(list) != 1 || list[0].ID != forever.ID {
		t.Errorf("list after the first expired: %+v", list)
	}
	if list := must(s.ListExposures(ctx, other.ID, "", T0))(t); len(list) != 0 {
		t.Errorf("another org lists %+v", list)
	}

	wantErr(t, "revoke from another org", s.RevokeExposure(ctx, other.ID, forever.ID, T0.Add(time.Minute)), store.ErrNotFound)
	noErr(t, s.RevokeExposure(ctx, org.ID, forever.ID, T0.Add(time.Minute)))
	wantErr(t, "revoke twice", s.RevokeExposure(ctx, org.ID, forever.ID, T0.Add(2*time.Minute)), store.ErrNotFound)
	_, err = s.ExposureByToken(ctx, tok("b"), T0.Add(2*time.Minute))
	wantErr(t, "revoked exposure", err, store.ErrNotFound)

	for _, bad := range []store.Exposure{
		{OrgID: org.ID, MachineID: m.ID, Port: 0, Access: store.AccessOrg, TokenHash: tok("c"), CreatedAt: T0},
		{OrgID: org.ID, MachineID: m.ID, Port: 70000, Access: store.AccessOrg, TokenHash: tok("c"), CreatedAt: T0},
		{OrgID: org.ID, MachineID: m.ID, Port: 80, Access: "everyone", TokenHash: tok("c"), CreatedAt: T0},
		{OrgID: org.ID, MachineID: m.ID, Port: 80, Access: store.AccessOrg, CreatedAt: T0},
		{OrgID: org.ID, MachineID: m.ID, Port: 80, Access: store.AccessOrg, TokenHash: tok("c")},
		{OrgID: org.ID, MachineID: m.ID, Port: 80, Access: store.AccessOrg, TokenHash: tok("c"), CreatedAt: T0, ExpiresAt: T0},
	} {
		_, err := s.CreateExposure(ctx, bad)
		wantErr(t, "bad exposure", err, store.ErrInvalid)
	}
	_, err = s.CreateExposure(ctx, store.Exposure{OrgID: org.ID, MachineID: "m-none", Port: 80, Access: store.AccessOrg, TokenHash: tok("c"), CreatedAt: T0})
	wantErr(t, "unknown machine", err, store.ErrNotFound)
	_, err = s.CreateExposure(ctx, store.Exposure{OrgID: org.ID, MachineID: m.ID, Port: 80, Access: store.AccessOrg, TokenHash: tok("a"), CreatedAt: T0})
	wantErr(t, "same token twice", err, store.ErrConflict)
	if list := must(s.ListExposures(ctx, org.ID, "", T0))(t); len(list) != 1 {
		t.Errorf("bad input stored something: %+v", list)
	}
}
