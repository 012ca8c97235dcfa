package store

import (
	"database/sql"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSQLiteOwnerMigration: a store from before ownership was a token's
// (every admin token of the first org acted as owner) keeps exactly one
// owner after the upgrade: the first org's earliest live admin token,
// which is the one agenthub init made.
func TestSQLiteOwnerMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("sqlite", sqliteDSN(":memory:"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	s := &SQLite{newSQLStore(db, sqliteDialect{})}
	t.Cleanup(func() { s.Close() })
	ms, err := loadMigrations("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	const before = 6 // the last step before tokens carried ownership
	if err := s.migrate(ctx, ms[:before]); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO orgs (id, name, created_at) VALUES ('org-b', 'acme', ?), ('org-a', 'default', ?)`, micros(t0.Add(time.Hour)), micros(t0))
	tok := func(id, org, role string, at time.Duration, revoked bool) {
		var rev any
		if revoked {
			rev = micros(t0.Add(at + time.Minute))
		}
		exec(`INSERT INTO api_tokens (id, org_id, name, role, sha256, created_at, revoked_at) VALUES (?, ?, ?, ?, randomblob(32), ?, ?)`,
			id, org, id, role, micros(t0.Add(at)), rev)
	}
	tok("tok-member", "org-a", "member", 0, false)        // older, but a member
	tok("tok-init", "org-a", "admin", time.Second, false) // agenthub init's
	tok("tok-admin2", "org-a", "admin", time.Hour, false) // an admin made later: no longer owner
	tok("tok-acme", "org-b", "admin", 0, false)           // another org's admin
	if err := s.migrate(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, org := range []string{"org-a", "org-b"} {
		ts, err := s.ListTokens(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		for _, t := range ts {
			got[t.ID] = t.Owner
		}
	}
	want := map[string]bool{"tok-member": false, "tok-init": true, "tok-admin2": false, "tok-acme": false}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("owners after the upgrade (-got +want):\n%s", diff)
	}
}

// TestSQLiteOwnerMigrationRevokedInit: with init's token revoked, the
// earliest live admin token of the first org is the owner.
func TestSQLiteOwnerMigrationRevokedInit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("sqlite", sqliteDSN(":memory:"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	s := &SQLite{newSQLStore(db, sqliteDialect{})}
	t.Cleanup(func() { s.Close() })
	ms, err := loadMigrations("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.migrate(ctx, ms[:6]); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO orgs (id, name, created_at) VALUES ('org-a', 'default', 1)`,
		`INSERT INTO api_tokens (id, org_id, name, role, sha256, created_at, revoked_at) VALUES ('tok-init', 'org-a', 'owner', 'admin', randomblob(32), 1, 2)`,
		`INSERT INTO api_tokens (id, org_id, name, role, sha256, created_at) VALUES ('tok-next', 'org-a', 'owner', 'admin', randomblob(32), 3)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.migrate(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ts, err := s.ListTokens(ctx, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, t := range ts {
		got[t.ID] = t.Owner
	}
	if diff := cmp.Diff(got, map[string]bool{"tok-init": false, "tok-next": true}); diff != "" {
		t.Errorf("owners after the upgrade (-got +want):\n%s", diff)
	}
}
