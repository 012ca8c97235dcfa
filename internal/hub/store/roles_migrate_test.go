package store

import (
	"crypto/rand"
	"database/sql"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

// ownerStep is the migration that made ownership a token's: the stores
// below are migrated to the step before it, filled as an older hub left
// them, then upgraded.
const ownerStep = 8

// oldStore is a store migrated up to (not including) ownerStep.
type oldStore struct {
	s       *sqlStore
	migrate func(ms []migration) error
	all     []migration
}

func sqliteBefore(t *testing.T) oldStore {
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
	o := oldStore{s: s.sqlStore, migrate: func(ms []migration) error { return s.migrate(t.Context(), ms) }, all: ms}
	if err := o.migrate(ms[:ownerStep-1]); err != nil {
		t.Fatal(err)
	}
	return o
}

func postgresBefore(t *testing.T) oldStore {
	cfg, err := pgx.ParseConfig(pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &Postgres{sqlStore: newSQLStore(stdlib.OpenDB(*cfg), &pgDialect{}), cfg: cfg}
	t.Cleanup(func() { s.Close() })
	ms, err := loadMigrations("postgres")
	if err != nil {
		t.Fatal(err)
	}
	o := oldStore{s: s.sqlStore, migrate: func(ms []migration) error { return s.migrate(t.Context(), ms) }, all: ms}
	if err := o.migrate(ms[:ownerStep-1]); err != nil {
		t.Fatal(err)
	}
	return o
}

type oldToken struct {
	id, org, role string
	at            time.Duration // after t0
	revoked       bool
}

// upgradeOwners fills an old store with orgs and tokens, upgrades it, and
// returns which tokens are owners after.
func upgradeOwners(t *testing.T, o oldStore, tokens []oldToken) map[string]bool {
	t.Helper()
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := o.s.db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The first org is the oldest, whatever its id or name.
	exec(`INSERT INTO orgs (id, name, created_at) VALUES ('org-b', 'acme', ?), ('org-a', 'default', ?)`, micros(t0.Add(time.Hour)), micros(t0))
	for _, tk := range tokens {
		var rev any
		if tk.revoked {
			rev = micros(t0.Add(tk.at + time.Minute))
		}
		hash := make([]byte, 32)
		rand.Read(hash)
		exec(`INSERT INTO api_tokens (id, org_id, name, role, sha256, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			tk.id, tk.org, tk.id, tk.role, hash, micros(t0.Add(tk.at)), rev)
	}
	if err := o.migrate(o.all); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, org := range []string{"org-a", "org-b"} {
		ts, err := o.s.ListTokens(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			got[tk.ID] = tk.Owner
		}
	}
	return got
}

// TestOwnerMigration: a store from before ownership was a token's (every
// admin token of the first org acted as owner) keeps exactly one owner
// after the upgrade: the first org's earliest live admin token, which is
// the one agenthub init made (or, that one revoked, the next).
func TestOwnerMigration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tokens []oldToken
		want   map[string]bool
	}{
		{"init's token", []oldToken{
			{"tok-member", "org-a", "member", 0, false},         // older, but a member
			{"tok-init", "org-a", "admin", time.Second, false},  // agenthub init's
			{"tok-admin2", "org-a", "admin", time.Hour, false},  // made later: no longer owner
			{"tok-acme", "org-b", "admin", -time.Minute, false}, // another org's admin, older still
		}, map[string]bool{"tok-member": false, "tok-init": true, "tok-admin2": false, "tok-acme": false}},
		{"init's token revoked", []oldToken{
			{"tok-init", "org-a", "admin", 0, true},
			{"tok-next", "org-a", "admin", time.Hour, false},
		}, map[string]bool{"tok-init": false, "tok-next": true}},
		{"no admin left", []oldToken{
			{"tok-init", "org-a", "admin", 0, true},
			{"tok-m", "org-a", "member", time.Hour, false},
		}, map[string]bool{"tok-init": false, "tok-m": false}},
	}
	for _, st := range []struct {
		name string
		open func(*testing.T) oldStore
	}{{"sqlite", sqliteBefore}, {"postgres", postgresBefore}} {
		for _, tc := range cases {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				if diff := cmp.Diff(upgradeOwners(t, st.open(t), tc.tokens), tc.want); diff != "" {
					t.Errorf("owners after the upgrade (-got +want):\n%s", diff)
				}
			})
		}
	}
}
