package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

func testConsoleSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	_, th := store.NewToken()
	must(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "alice", Role: store.RoleMember, Hash: th, CreatedAt: T0}))(t)
	_, id := store.NewToken()
	want := store.ConsoleSession{IDHash: id, OrgID: acme.ID, TokenHash: th, Name: "alice", CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}
	noErr(t, s.CreateConsoleSession(ctx, want))

	if diff := cmp.Diff(must(s.ConsoleSession(ctx, id, T0.Add(59*time.Minute)))(t), want); diff != "" {
		t.Errorf("ConsoleSession (-got +want):\n%s", diff)
	}
	_, other := store.NewToken()
	errs := []struct {
		name string
		err  error
		want error
	}{
		{"expired", second(s.ConsoleSession(ctx, id, T0.Add(time.Hour))), store.ErrNotFound},
		{"unknown", second(s.ConsoleSession(ctx, other, T0)), store.ErrNotFound},
		{"same id", s.CreateConsoleSession(ctx, want), store.ErrConflict},
		{"unknown token", s.CreateConsoleSession(ctx, store.ConsoleSession{IDHash: other, OrgID: acme.ID, TokenHash: other, Name: "x", CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}), store.ErrNotFound},
		{"unknown org", s.CreateConsoleSession(ctx, store.ConsoleSession{IDHash: other, OrgID: "org-nope", Name: "x", CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}), store.ErrNotFound},
		{"no name", s.CreateConsoleSession(ctx, store.ConsoleSession{IDHash: other, OrgID: acme.ID, CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}), store.ErrInvalid},
		{"no id", s.CreateConsoleSession(ctx, store.ConsoleSession{OrgID: acme.ID, Name: "x", CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}), store.ErrInvalid},
		{"expires first", s.CreateConsoleSession(ctx, store.ConsoleSession{IDHash: other, OrgID: acme.ID, Name: "x", CreatedAt: T0, ExpiresAt: T0}), store.ErrInvalid},
	}
	for _, e := range errs {
		wantErr(t, e.name, e.err, e.want)
	}
	// Nothing the refused calls tried was stored.
	wantErr(t, "after refusals", second(s.ConsoleSession(ctx, other, T0)), store.ErrNotFound)

	// Switching the org a session acts in: to another org and back.
	beta := must(s.CreateOrg(ctx, "beta", T0))(t)
	for _, tt := range []struct {
		name, org string
		at        time.Time
		wantErr   error
		want      string // ActingOrgID after
	}{
		{"switch", beta.ID, T0, nil, beta.ID},
		{"unknown org", "org-nope", T0, store.ErrNotFound, beta.ID},
		{"expired session", "", T0.Add(time.Hour), store.ErrNotFound, beta.ID},
		{"back to its own", "", T0, nil, ""},
	} {
		wantErr(t, tt.name, s.SetConsoleSessionOrg(ctx, id, tt.org, tt.at), tt.wantErr)
		if got := must(s.ConsoleSession(ctx, id, T0))(t).ActingOrgID; got != tt.want {
			t.Errorf("%s: ActingOrgID = %q, want %q", tt.name, got, tt.want)
		}
	}
	wantErr(t, "unknown session", s.SetConsoleSessionOrg(ctx, other, beta.ID, T0), store.ErrNotFound)

	// Expired rows go; live ones stay.
	_, id2 := store.NewToken()
	noErr(t, s.CreateConsoleSession(ctx, store.ConsoleSession{IDHash: id2, OrgID: acme.ID, Name: "owner", CreatedAt: T0, ExpiresAt: T0.Add(3 * time.Hour)}))
	if n := must(s.DeleteExpiredConsole(ctx, T0.Add(2*time.Hour)))(t); n != 1 {
		t.Errorf("DeleteExpiredConsole = %d, want 1", n)
	}
	must(s.ConsoleSession(ctx, id2, T0))(t)

	noErr(t, s.DeleteConsoleSession(ctx, id2))
	noErr(t, s.DeleteConsoleSession(ctx, id2)) // twice is fine
	wantErr(t, "signed out", second(s.ConsoleSession(ctx, id2, T0)), store.ErrNotFound)
}

func testConsoleLinks(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	_, code := store.NewToken()
	noErr(t, s.CreateConsoleLink(ctx, store.ConsoleLink{Hash: code, OrgID: acme.ID, CreatedAt: T0, ExpiresAt: T0.Add(10 * time.Minute)}))
	wantErr(t, "same link", s.CreateConsoleLink(ctx, store.ConsoleLink{Hash: code, OrgID: acme.ID, CreatedAt: T0, ExpiresAt: T0.Add(time.Minute)}), store.ErrConflict)
	_, other := store.NewToken()
	wantErr(t, "link unknown org", s.CreateConsoleLink(ctx, store.ConsoleLink{Hash: other, OrgID: "org-nope", CreatedAt: T0, ExpiresAt: T0.Add(time.Minute)}), store.ErrNotFound)

	_, sid := store.NewToken()
	sess := store.ConsoleSession{IDHash: sid, Name: "owner", CreatedAt: T0.Add(time.Minute), ExpiresAt: T0.Add(time.Hour)}
	got := must(s.RedeemConsoleLink(ctx, code, T0.Add(time.Minute), sess))(t)
	want := sess
	want.OrgID = acme.ID
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("RedeemConsoleLink (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.ConsoleSession(ctx, sid, T0.Add(time.Minute)))(t), want); diff != "" {
		t.Errorf("the link's session (-got +want):\n%s", diff)
	}

	_, sid2 := store.NewToken()
	sess2 := store.ConsoleSession{IDHash: sid2, Name: "owner", CreatedAt: T0.Add(2 * time.Minute), ExpiresAt: T0.Add(time.Hour)}
	wantErr(t, "used twice", second(s.RedeemConsoleLink(ctx, code, T0.Add(2*time.Minute), sess2)), store.ErrPrecondition)
	wantErr(t, "unknown link", second(s.RedeemConsoleLink(ctx, other, T0.Add(2*time.Minute), sess2)), store.ErrNotFound)

	_, late := store.NewToken()
	noErr(t, s.CreateConsoleLink(ctx, store.ConsoleLink{Hash: late, OrgID: acme.ID, CreatedAt: T0, ExpiresAt: T0.Add(time.Minute)}))
	wantErr(t, "expired link", second(s.RedeemConsoleLink(ctx, late, T0.Add(time.Minute), sess2)), store.ErrPrecondition)
	wantErr(t, "no session from refused redemptions", second(s.ConsoleSession(ctx, sid2, T0)), store.ErrNotFound)
}

func testConsoleLinkRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	_, code := store.NewToken()
	noErr(t, s.CreateConsoleLink(ctx, store.ConsoleLink{Hash: code, OrgID: acme.ID, CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)}))
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, sid := store.NewToken()
			_, errs[i] = s.RedeemConsoleLink(ctx, code, T0.Add(time.Minute),
				store.ConsoleSession{IDHash: sid, Name: "owner", CreatedAt: T0.Add(time.Minute), ExpiresAt: T0.Add(time.Hour)})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		wantErr(t, "a losing redemption", err, store.ErrPrecondition)
	}
	if won != 1 {
		t.Errorf("%d redemptions of one link succeeded, want 1", won)
	}
}
