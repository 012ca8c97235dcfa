// Package storetest is the conformance suite every store.Store
// implementation passes: the SQLite one in its tests, a Postgres one later
// against a real server. It checks behaviour through the interface only.
package storetest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Opener returns a new, empty store for one test; the test's cleanup closes it.
type Opener func(t *testing.T) store.Store

// T0 is the time the suite's histories start at.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs the whole suite; every subtest gets a store of its own.
func Run(t *testing.T, open Opener) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"ServerSecret", testServerSecret},
		{"Orgs", testOrgs},
		{"Tokens", testTokens},
		{"PairingCodes", testPairingCodes},
		{"FailPairingCode", testFailPairingCode},
		{"RedeemPairingCode", testRedeemPairingCode},
		{"RedeemConcurrently", testRedeemConcurrently},
		{"Machines", testMachines},
		{"Activity", testActivity},
		{"PruneActivity", testPruneActivity},
		{"SandboxMachine", testSandboxMachine},
		{"Environments", testEnvironments},
		{"ValidationRace", testValidationRace},
		{"Sandboxes", testSandboxes},
		{"RateLimits", testRateLimits},
		{"RateLimitsConcurrently", testRateLimitsConcurrently},
		{"Replicas", testReplicas},
		{"ConsoleSessions", testConsoleSessions},
		{"ConsoleLinks", testConsoleLinks},
		{"ConsoleLinkRace", testConsoleLinkRace},
		{"ListRoutes", testListRoutes},
		{"Quotas", testQuotas},
		{"SandboxStates", testSandboxStates},
		{"SandboxPolicies", testSandboxPolicies},
		{"SandboxArchive", testSandboxArchive},
		{"Exposures", testExposures},
		{"EgressLists", testEgressLists},
		{"Broker", testBroker},
		{"SandboxProcesses", testSandboxProcesses},
		{"Leases", testLeases},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// wantErr fails the test unless errors.Is(err, want) (want nil: no error).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("%s: unexpected error %v", what, err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// must(f())(t) returns f's value, failing the test at once if f failed.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// NewKey returns a fresh Ed25519 public key.
func NewKey(t testing.TB) ed25519.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func hmac32(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func testServerSecret(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := must(s.ServerSecret(ctx))(t)
	if len(a) != 32 {
		t.Fatalf("secret has %d bytes, want 32", len(a))
	}
	b := must(s.ServerSecret(ctx))(t)
	if diff := cmp.Diff(b, a); diff != "" {
		t.Errorf("second read (-got +want):\n%s", diff)
	}
}

func testOrgs(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	globex := must(s.CreateOrg(ctx, "globex", T0.Add(time.Second)))(t)
	if acme.ID == "" || acme.ID == globex.ID {
		t.Fatalf("IDs %q and %q: want distinct and set", acme.ID, globex.ID)
	}
	if diff := cmp.Diff(must(s.Org(ctx, acme.ID))(t), store.Org{ID: acme.ID, Name: "acme", CreatedAt: T0}); diff != "" {
		t.Errorf("Org (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.OrgByName(ctx, "globex"))(t), globex); diff != "" {
		t.Errorf("OrgByName (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.ListOrgs(ctx))(t), []store.Org{acme, globex}); diff != "" {
		t.Errorf("ListOrgs (-got +want):\n%s", diff)
	}

	errs := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate name", second(s.CreateOrg(ctx, "acme", T0)), store.ErrConflict},
		{"empty name", second(s.CreateOrg(ctx, "", T0)), store.ErrInvalid},
		{"zero time", second(s.CreateOrg(ctx, "initech", time.Time{})), store.ErrInvalid},
		{"unknown ID", second(s.Org(ctx, "org-nope")), store.ErrNotFound},
		{"unknown name", second(s.OrgByName(ctx, "nope")), store.ErrNotFound},
	}
	for _, e := range errs {
		wantErr(t, e.name, e.err, e.want)
	}
	if n := len(must(s.ListOrgs(ctx))(t)); n != 2 {
		t.Errorf("after failed creates: %d orgs, want 2", n)
	}
}

func second[T any](_ T, err error) error { return err }

func testTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	globex := must(s.CreateOrg(ctx, "globex", T0))(t)
	secret, hash := store.NewToken()
	tok := must(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "ci", Role: store.RoleAdmin, Hash: hash, CreatedAt: T0}))(t)
	want := store.Token{ID: tok.ID, OrgID: acme.ID, Name: "ci", Role: store.RoleAdmin, Hash: hash, CreatedAt: T0}
	if diff := cmp.Diff(tok, want); diff != "" {
		t.Errorf("CreateToken (-got +want):\n%s", diff)
	}
	parsed := must(store.ParseToken(secret))(t)
	if diff := cmp.Diff(must(s.TokenByHash(ctx, parsed))(t), want); diff != "" {
		t.Errorf("TokenByHash (-got +want):\n%s", diff)
	}

	noErr(t, s.TouchToken(ctx, tok.ID, T0.Add(time.Minute)))
	want.LastUsedAt = T0.Add(time.Minute)
	if diff := cmp.Diff(must(s.TokenByHash(ctx, hash))(t), want); diff != "" {
		t.Errorf("after TouchToken (-got +want):\n%s", diff)
	}

	_, otherHash := store.NewToken()
	errs := []struct {
		name string
		err  error
		want error
	}{
		{"same live name", second(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "ci", Role: store.RoleMember, Hash: otherHash, CreatedAt: T0})), store.ErrConflict},
		{"same hash", second(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "ci2", Role: store.RoleMember, Hash: hash, CreatedAt: T0})), store.ErrConflict},
		{"bad role", second(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "x", Role: "root", Hash: otherHash, CreatedAt: T0})), store.ErrInvalid},
		{"no name", second(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Role: store.RoleMember, Hash: otherHash, CreatedAt: T0})), store.ErrInvalid},
		{"no hash", second(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "x", Role: store.RoleMember, CreatedAt: T0})), store.ErrInvalid},
		{"member owner", second(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "x", Role: store.RoleMember, Owner: true, Hash: otherHash, CreatedAt: T0})), store.ErrInvalid},
		{"unknown org", second(s.CreateToken(ctx, store.Token{OrgID: "org-nope", Name: "x", Role: store.RoleMember, Hash: otherHash, CreatedAt: T0})), store.ErrNotFound},
		{"unknown hash", second(s.TokenByHash(ctx, otherHash)), store.ErrNotFound},
		{"touch unknown", s.TouchToken(ctx, "tok-nope", T0), store.ErrNotFound},
		{"revoke from another org", s.RevokeToken(ctx, globex.ID, tok.ID, T0), store.ErrNotFound},
	}
	for _, e := range errs {
		wantErr(t, e.name, e.err, e.want)
	}

	// The same name in another org is fine.
	_, gh := store.NewToken()
	gtok := must(s.CreateToken(ctx, store.Token{OrgID: globex.ID, Name: "ci", Role: store.RoleMember, Hash: gh, CreatedAt: T0}))(t)

	// Revoked: the lookup refuses it, the name is free again, revoking twice
	// keeps the first time.
	noErr(t, s.RevokeToken(ctx, acme.ID, tok.ID, T0.Add(2*time.Minute)))
	noErr(t, s.RevokeToken(ctx, acme.ID, tok.ID, T0.Add(3*time.Minute)))
	wantErr(t, "revoked lookup", second(s.TokenByHash(ctx, hash)), store.ErrRevoked)
	_, h2 := store.NewToken()
	tok2 := must(s.CreateToken(ctx, store.Token{OrgID: acme.ID, Name: "ci", Role: store.RoleMember, Hash: h2, CreatedAt: T0.Add(4 * time.Minute)}))(t)

	want.RevokedAt = T0.Add(2 * time.Minute)
	if diff := cmp.Diff(must(s.ListTokens(ctx, acme.ID))(t), []store.Token{want, tok2}); diff != "" {
		t.Errorf("ListTokens(acme) (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.ListTokens(ctx, globex.ID))(t), []store.Token{gtok}); diff != "" {
		t.Errorf("ListTokens(globex) (-got +want):\n%s", diff)
	}

	// Ownership is the token's, kept as stored.
	_, oh := store.NewToken()
	owner := must(s.CreateToken(ctx, store.Token{OrgID: globex.ID, Name: "root", Role: store.RoleAdmin, Owner: true, Hash: oh, CreatedAt: T0.Add(time.Hour)}))(t)
	if !owner.Owner || !must(s.TokenByHash(ctx, oh))(t).Owner {
		t.Errorf("an owner token reads back as %+v, want Owner", must(s.TokenByHash(ctx, oh))(t))
	}
	if diff := cmp.Diff(must(s.ListTokens(ctx, globex.ID))(t), []store.Token{gtok, owner}); diff != "" {
		t.Errorf("ListTokens(globex) with an owner (-got +want):\n%s", diff)
	}
}

// newCode stores a code with the given selector for org, expiring after ttl.
func newCode(t *testing.T, s store.Store, orgID, sel string, ttl time.Duration) store.PairingCode {
	t.Helper()
	return must(s.CreatePairingCode(t.Context(), store.PairingCode{
		OrgID: orgID, Selector: hmac32("sel" + sel), MAC: hmac32("mac" + sel),
		CreatedBy: "admin", CreatedAt: T0, ExpiresAt: T0.Add(ttl),
	}))(t)
}

func testPairingCodes(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	c := newCode(t, s, acme.ID, "a", 15*time.Minute)
	want := store.PairingCode{
		ID: c.ID, OrgID: acme.ID, Selector: hmac32("sela"), MAC: hmac32("maca"),
		CreatedBy: "admin", CreatedAt: T0, ExpiresAt: T0.Add(15 * time.Minute),
	}
	if diff := cmp.Diff(c, want); diff != "" {
		t.Errorf("CreatePairingCode (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.PairingCodeBySelector(ctx, hmac32("sela")))(t), want); diff != "" {
		t.Errorf("PairingCodeBySelector (-got +want):\n%s", diff)
	}
	old := newCode(t, s, acme.ID, "b", time.Minute)
	if diff := cmp.Diff(must(s.ListPairingCodes(ctx, acme.ID))(t), []store.PairingCode{want, old}, cmpopts.SortSlices(func(a, b store.PairingCode) bool { return a.ID < b.ID })); diff != "" {
		t.Errorf("ListPairingCodes (-got +want):\n%s", diff)
	}

	base := store.PairingCode{OrgID: acme.ID, Selector: hmac32("selz"), MAC: hmac32("macz"), CreatedAt: T0, ExpiresAt: T0.Add(time.Minute)}
	with := func(f func(*store.PairingCode)) store.PairingCode { c := base; f(&c); return c }
	errs := []struct {
		name string
		code store.PairingCode
		want error
	}{
		{"selector taken", with(func(c *store.PairingCode) { c.Selector = hmac32("sela") }), store.ErrConflict},
		{"unknown org", with(func(c *store.PairingCode) { c.OrgID = "org-nope" }), store.ErrNotFound},
		{"short MAC", with(func(c *store.PairingCode) { c.MAC = []byte("short") }), store.ErrInvalid},
		{"expires before created", with(func(c *store.PairingCode) { c.ExpiresAt = T0 }), store.ErrInvalid},
	}
	for _, e := range errs {
		wantErr(t, e.name, second(s.CreatePairingCode(ctx, e.code)), e.want)
	}
	wantErr(t, "unknown selector", second(s.PairingCodeBySelector(ctx, hmac32("nope"))), store.ErrNotFound)

	// Deleting codes that expired before a cutoff, used or not.
	n := must(s.DeletePairingCodes(ctx, T0.Add(2*time.Minute)))(t)
	if n != 1 {
		t.Errorf("DeletePairingCodes deleted %d, want 1", n)
	}
	if diff := cmp.Diff(must(s.ListPairingCodes(ctx, acme.ID))(t), []store.PairingCode{want}); diff != "" {
		t.Errorf("after DeletePairingCodes (-got +want):\n%s", diff)
	}
}

func testFailPairingCode(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	c := newCode(t, s, acme.ID, "a", 15*time.Minute)
	at := T0.Add(time.Minute)
	for i := 1; i <= 3; i++ {
		got := must(s.FailPairingCode(ctx, c.ID, 3, at))(t)
		if got.FailedAttempts != i {
			t.Errorf("after failure %d: FailedAttempts = %d", i, got.FailedAttempts)
		}
		if locked := !got.LockedAt.IsZero(); locked != (i == 3) {
			t.Errorf("after failure %d: locked = %v", i, locked)
		}
	}
	got := must(s.PairingCodeBySelector(ctx, c.Selector))(t)
	if !got.LockedAt.Equal(at) || got.FailedAttempts != 3 || got.Live(at) {
		t.Errorf("after 3 failures: %+v, want locked at %v with 3 attempts", got, at)
	}
	wantErr(t, "fail a locked code", second(s.FailPairingCode(ctx, c.ID, 3, at)), store.ErrPrecondition)
	wantErr(t, "redeem a locked code", second(s.RedeemPairingCode(ctx, c.ID, "", at, store.Machine{PublicKey: NewKey(t)})), store.ErrPrecondition)

	expired := newCode(t, s, acme.ID, "b", time.Minute)
	wantErr(t, "fail an expired code", second(s.FailPairingCode(ctx, expired.ID, 3, T0.Add(time.Minute))), store.ErrPrecondition)
	wantErr(t, "fail an unknown code", second(s.FailPairingCode(ctx, "pc-nope", 3, at)), store.ErrNotFound)
	wantErr(t, "lockAfter 0", second(s.FailPairingCode(ctx, expired.ID, 0, T0)), store.ErrInvalid)
	if got := must(s.PairingCodeBySelector(ctx, expired.Selector))(t); got.FailedAttempts != 0 {
		t.Errorf("expired code counted %d failures, want 0", got.FailedAttempts)
	}
}

func testRedeemPairingCode(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	globex := must(s.CreateOrg(ctx, "globex", T0))(t)
	c := newCode(t, s, globex.ID, "g", 15*time.Minute)
	key := NewKey(t)
	at := T0.Add(time.Minute)
	req := store.Machine{
		OrgID: acme.ID, // ignored: the code decides the org
		Name:  "laptop", Hostname: "laptop.local", OS: "linux", Arch: "amd64", Version: "1.2.3", PublicKey: key,
	}
	m := must(s.RedeemPairingCode(ctx, c.ID, "192.0.2.1:5000", at, req))(t)
	want := req
	want.ID, want.OrgID, want.CreatedAt = m.ID, globex.ID, at
	if diff := cmp.Diff(m, want); diff != "" {
		t.Errorf("RedeemPairingCode (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.Machine(ctx, m.ID))(t), want); diff != "" {
		t.Errorf("Machine (-got +want):\n%s", diff)
	}
	used := must(s.PairingCodeBySelector(ctx, c.Selector))(t)
	if !used.UsedAt.Equal(at) || used.UsedBy != m.ID || used.UsedFrom != "192.0.2.1:5000" {
		t.Errorf("used code: %+v", used)
	}

	req.PublicKey = NewKey(t)
	wantErr(t, "redeem twice", second(s.RedeemPairingCode(ctx, c.ID, "", at, req)), store.ErrPrecondition)
	wantErr(t, "redeem unknown", second(s.RedeemPairingCode(ctx, "pc-nope", "", at, req)), store.ErrNotFound)

	// A key registered already: nothing changes, the code stays usable.
	c2 := newCode(t, s, acme.ID, "a", 15*time.Minute)
	req.PublicKey = key
	wantErr(t, "registered key", second(s.RedeemPairingCode(ctx, c2.ID, "", at, req)), store.ErrConflict)
	req.PublicKey = []byte("short")
	wantErr(t, "short key", second(s.RedeemPairingCode(ctx, c2.ID, "", at, req)), store.ErrInvalid)
	if got := must(s.PairingCodeBySelector(ctx, c2.Selector))(t); !got.Live(at) {
		t.Errorf("code not live after failed redemptions: %+v", got)
	}
	if n := len(must(s.ListMachines(ctx, acme.ID))(t)); n != 0 {
		t.Errorf("acme has %d machines after failed redemptions, want 0", n)
	}
	wantErr(t, "redeem expired", second(s.RedeemPairingCode(ctx, c2.ID, "", T0.Add(15*time.Minute), store.Machine{PublicKey: NewKey(t)})), store.ErrPrecondition)
}

func testRedeemConcurrently(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	c := newCode(t, s, acme.ID, "a", 15*time.Minute)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{}) // all at once, not one after another
	for i := range n {
		key := NewKey(t)
		wg.Go(func() {
			<-start
			_, errs[i] = s.RedeemPairingCode(ctx, c.ID, "", T0.Add(time.Minute), store.Machine{Hostname: fmt.Sprint("h", i), PublicKey: key})
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrPrecondition):
			t.Errorf("loser got %v, want ErrPrecondition", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d redemptions won, want exactly 1", wins)
	}
	if got := len(must(s.ListMachines(ctx, acme.ID))(t)); got != 1 {
		t.Errorf("%d machines, want 1", got)
	}
}

func testMachines(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	globex := must(s.CreateOrg(ctx, "globex", T0))(t)
	key := NewKey(t)
	m := must(s.CreateMachine(ctx, store.Machine{OrgID: acme.ID, Name: "sandbox", Hostname: "sb", OS: "linux", Arch: "arm64", Version: "1.0.0", PublicKey: key, CreatedAt: T0}))(t)
	if len(m.ID) < 3 || m.ID[:2] != "m-" {
		t.Errorf("machine ID %q: want m-…", m.ID)
	}
	g := must(s.CreateMachine(ctx, store.Machine{OrgID: globex.ID, Name: "other", PublicKey: NewKey(t), CreatedAt: T0}))(t)

	errs := []struct {
		name string
		err  error
		want error
	}{
		{"registered key", second(s.CreateMachine(ctx, store.Machine{OrgID: globex.ID, PublicKey: key, CreatedAt: T0})), store.ErrConflict},
		{"short key", second(s.CreateMachine(ctx, store.Machine{OrgID: acme.ID, PublicKey: key[:31], CreatedAt: T0})), store.ErrInvalid},
		{"unknown org", second(s.CreateMachine(ctx, store.Machine{OrgID: "org-nope", PublicKey: NewKey(t), CreatedAt: T0})), store.ErrNotFound},
		{"unknown machine", second(s.Machine(ctx, "m-nope")), store.ErrNotFound},
		{"seen unknown", s.MachineSeen(ctx, "m-nope", T0, ""), store.ErrNotFound},
		{"revoke from another org", s.RevokeMachine(ctx, globex.ID, m.ID, T0), store.ErrNotFound},
	}
	for _, e := range errs {
		wantErr(t, e.name, e.err, e.want)
	}

	// Seen: the time never moves back; an empty version keeps the old one.
	noErr(t, s.MachineSeen(ctx, m.ID, T0.Add(2*time.Minute), "1.1.0"))
	noErr(t, s.MachineSeen(ctx, m.ID, T0.Add(time.Minute), ""))
	// Revoked: revoking twice keeps the first time.
	noErr(t, s.RevokeMachine(ctx, acme.ID, m.ID, T0.Add(3*time.Minute)))
	noErr(t, s.RevokeMachine(ctx, acme.ID, m.ID, T0.Add(4*time.Minute)))
	want := m
	want.LastSeenAt, want.Version, want.RevokedAt = T0.Add(2*time.Minute), "1.1.0", T0.Add(3*time.Minute)
	if diff := cmp.Diff(must(s.Machine(ctx, m.ID))(t), want); diff != "" {
		t.Errorf("Machine (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.ListMachines(ctx, acme.ID))(t), []store.Machine{want}); diff != "" {
		t.Errorf("ListMachines(acme) (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(must(s.ListMachines(ctx, globex.ID))(t), []store.Machine{g}); diff != "" {
		t.Errorf("ListMachines(globex) (-got +want):\n%s", diff)
	}
}

// rec is an activity record with sequence number seq at T0+seq seconds.
func rec(seq uint64) store.Activity {
	return store.Activity{
		Seq:    seq,
		Time:   T0.Add(time.Duration(seq) * time.Second),
		Record: json.RawMessage(fmt.Sprintf(`{"seq":%d,"kind":"process.exec"}`, seq)),
	}
}

// seqs returns the machine and sequence number of each record.
func seqs(as []store.Activity) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s/%d", a.MachineID, a.Seq))
	}
	return out
}

func testActivity(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	globex := must(s.CreateOrg(ctx, "globex", T0))(t)
	m1 := must(s.CreateMachine(ctx, store.Machine{OrgID: acme.ID, PublicKey: NewKey(t), CreatedAt: T0}))(t)
	m2 := must(s.CreateMachine(ctx, store.Machine{OrgID: acme.ID, PublicKey: NewKey(t), CreatedAt: T0}))(t)
	g := must(s.CreateMachine(ctx, store.Machine{OrgID: globex.ID, PublicKey: NewKey(t), CreatedAt: T0}))(t)

	if seq := must(s.LastSeq(ctx, m1.ID))(t); seq != 0 {
		t.Errorf("LastSeq before any activity = %d, want 0", seq)
	}
	noErr(t, s.AppendActivity(ctx, m1.ID, []store.Activity{rec(1), rec(2)}))
	noErr(t, s.AppendActivity(ctx, m2.ID, []store.Activity{rec(1)}))
	// A resumed watch that overlaps: 2 is skipped, 3 is new.
	noErr(t, s.AppendActivity(ctx, m1.ID, []store.Activity{rec(2), rec(3)}))
	noErr(t, s.AppendActivity(ctx, g.ID, []store.Activity{rec(7)}))
	noErr(t, s.AppendActivity(ctx, m1.ID, nil))

	for _, tt := range []struct {
		machine string
		want    uint64
	}{{m1.ID, 3}, {m2.ID, 1}, {g.ID, 7}} { // g: its first record sets where it starts
		if seq := must(s.LastSeq(ctx, tt.machine))(t); seq != tt.want {
			t.Errorf("LastSeq(%s) = %d, want %d", tt.machine, seq, tt.want)
		}
	}

	all := must(s.ListActivity(ctx, store.ActivityQuery{OrgID: acme.ID}))(t)
	if diff := cmp.Diff(seqs(all), []string{m1.ID + "/1", m1.ID + "/2", m2.ID + "/1", m1.ID + "/3"}); diff != "" {
		t.Errorf("ListActivity(acme) (-got +want):\n%s", diff)
	}
	want1 := rec(1)
	want1.ID, want1.OrgID, want1.MachineID, want1.Source, want1.Subject = all[0].ID, acme.ID, m1.ID, store.SourceDaemon, m1.ID
	if diff := cmp.Diff(all[0], want1); diff != "" {
		t.Errorf("first record (-got +want):\n%s", diff)
	}

	queries := []struct {
		name string
		q    store.ActivityQuery
		want []string
	}{
		{"one machine", store.ActivityQuery{OrgID: acme.ID, MachineID: m1.ID}, []string{m1.ID + "/1", m1.ID + "/2", m1.ID + "/3"}},
		{"after a cursor", store.ActivityQuery{OrgID: acme.ID, AfterID: all[1].ID}, []string{m2.ID + "/1", m1.ID + "/3"}},
		{"oldest two", store.ActivityQuery{OrgID: acme.ID, Limit: 2}, []string{m1.ID + "/1", m1.ID + "/2"}},
		{"newest two", store.ActivityQuery{OrgID: acme.ID, Limit: 2, Newest: true}, []string{m2.ID + "/1", m1.ID + "/3"}},
		{"another org's machine", store.ActivityQuery{OrgID: acme.ID, MachineID: g.ID}, nil},
		{"other org", store.ActivityQuery{OrgID: globex.ID}, []string{g.ID + "/7"}},
	}
	for _, q := range queries {
		if diff := cmp.Diff(seqs(must(s.ListActivity(ctx, q.q))(t)), q.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", q.name, diff)
		}
	}

	// The cursor advances by one only: a forged high number is stored but
	// the records after the cursor still move it.
	noErr(t, s.AppendActivity(ctx, g.ID, []store.Activity{rec(1000000), rec(8), rec(9)}))
	if seq := must(s.LastSeq(ctx, g.ID))(t); seq != 9 {
		t.Errorf("LastSeq after a jump to 1000000 then 8, 9 = %d, want 9", seq)
	}
	noErr(t, s.AppendActivity(ctx, g.ID, []store.Activity{rec(10), rec(12)}))
	if seq := must(s.LastSeq(ctx, g.ID))(t); seq != 10 {
		t.Errorf("LastSeq after 10, 12 = %d, want 10", seq)
	}
	if diff := cmp.Diff(seqs(must(s.ListActivity(ctx, store.ActivityQuery{OrgID: globex.ID}))(t)),
		[]string{g.ID + "/7", g.ID + "/1000000", g.ID + "/8", g.ID + "/9", g.ID + "/10", g.ID + "/12"}); diff != "" {
		t.Errorf("globex after the jump (-got +want):\n%s", diff)
	}

	// The hub's records of calls to m2, stored under another machine's
	// numbers (m1 stands in for the hub's), are m2's when asked by machine.
	hubRec := rec(500)
	hubRec.Source, hubRec.Subject = store.SourceHub, m2.ID
	noErr(t, s.AppendActivity(ctx, m1.ID, []store.Activity{hubRec}))
	got := must(s.ListActivity(ctx, store.ActivityQuery{OrgID: acme.ID, MachineID: m2.ID}))(t)
	if len(got) != 2 || got[1].Source != store.SourceHub || got[1].Subject != m2.ID || got[1].MachineID != m1.ID || got[0].Source != store.SourceDaemon {
		t.Errorf("records about m2 = %+v, want its own (daemon) and the hub's", got)
	}
	bogus := rec(501)
	bogus.Source = "me"
	wantErr(t, "unknown source", s.AppendActivity(ctx, m1.ID, []store.Activity{bogus}), store.ErrInvalid)

	bad := rec(9)
	bad.Record = json.RawMessage(`{"truncated`)
	errs := []struct {
		name string
		err  error
		want error
	}{
		{"not JSON", s.AppendActivity(ctx, m1.ID, []store.Activity{rec(8), bad}), store.ErrInvalid},
		{"seq 0", s.AppendActivity(ctx, m1.ID, []store.Activity{rec(0)}), store.ErrInvalid},
		{"unknown machine", s.AppendActivity(ctx, "m-nope", []store.Activity{rec(1)}), store.ErrNotFound},
		{"LastSeq of unknown machine", second(s.LastSeq(ctx, "m-nope")), store.ErrNotFound},
		{"query without org", second(s.ListActivity(ctx, store.ActivityQuery{})), store.ErrInvalid},
	}
	for _, e := range errs {
		wantErr(t, e.name, e.err, e.want)
	}
	if seq := must(s.LastSeq(ctx, m1.ID))(t); seq != 3 {
		t.Errorf("LastSeq after rejected appends = %d, want 3 (nothing changed)", seq)
	}
}

func testPruneActivity(t *testing.T, s store.Store) {
	ctx := t.Context()
	acme := must(s.CreateOrg(ctx, "acme", T0))(t)
	globex := must(s.CreateOrg(ctx, "globex", T0))(t)
	m := must(s.CreateMachine(ctx, store.Machine{OrgID: acme.ID, PublicKey: NewKey(t), CreatedAt: T0}))(t)
	g := must(s.CreateMachine(ctx, store.Machine{OrgID: globex.ID, PublicKey: NewKey(t), CreatedAt: T0}))(t)
	var recs []store.Activity
	for i := uint64(1); i <= 10; i++ {
		recs = append(recs, rec(i))
	}
	noErr(t, s.AppendActivity(ctx, m.ID, recs))
	noErr(t, s.AppendActivity(ctx, g.ID, recs[:3]))

	list := func(org string) []uint64 {
		var out []uint64
		for _, a := range must(s.ListActivity(ctx, store.ActivityQuery{OrgID: org}))(t) {
			out = append(out, a.Seq)
		}
		return out
	}
	steps := []struct {
		name        string
		keep        int
		keepBytes   int64
		before      time.Time
		wantDeleted int64
		wantAcme    []uint64
		wantGlobex  []uint64
	}{
		{"nothing to do", 0, 0, time.Time{}, 0, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []uint64{1, 2, 3}},
		{"keep 4 per org", 4, 0, time.Time{}, 6, []uint64{7, 8, 9, 10}, []uint64{1, 2, 3}},
		// Records of 31 or 32 bytes: 70 bytes keep the newest two.
		{"keep 70 bytes per org", 0, 70, time.Time{}, 3, []uint64{9, 10}, []uint64{2, 3}},
		{"older than record 9", 0, 0, rec(9).Time, 2, []uint64{9, 10}, nil},
		{"everything", 0, 0, T0.Add(time.Hour), 2, nil, nil},
	}
	for _, st := range steps {
		n := must(s.PruneActivity(ctx, st.keep, st.keepBytes, st.before))(t)
		if n != st.wantDeleted {
			t.Errorf("%s: deleted %d, want %d", st.name, n, st.wantDeleted)
		}
		if diff := cmp.Diff(list(acme.ID), st.wantAcme); diff != "" {
			t.Errorf("%s: acme (-got +want):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(list(globex.ID), st.wantGlobex); diff != "" {
			t.Errorf("%s: globex (-got +want):\n%s", st.name, diff)
		}
	}
	// Pruning never lowers LastSeq, and IDs are never reused.
	if seq := must(s.LastSeq(ctx, m.ID))(t); seq != 10 {
		t.Errorf("LastSeq after pruning everything = %d, want 10", seq)
	}
	noErr(t, s.AppendActivity(ctx, m.ID, []store.Activity{rec(11)}))
	got := must(s.ListActivity(ctx, store.ActivityQuery{OrgID: acme.ID}))(t)
	if len(got) != 1 || got[0].ID <= 13 {
		t.Errorf("after pruning everything, appended %+v: want one record with ID > 13", got)
	}
	wantErr(t, "negative keep", second(s.PruneActivity(ctx, -1, 0, time.Time{})), store.ErrInvalid)
	wantErr(t, "negative byte budget", second(s.PruneActivity(ctx, 0, -1, time.Time{})), store.ErrInvalid)
}
