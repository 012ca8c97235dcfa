package store

import (
	"sync"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
	"github.com/google/go-cmp/cmp"
)

// The conformance suite runs against Postgres in postgres_suite_test.go
// (package store_test, which also starts the cluster in TestMain); these
// tests look inside the Postgres implementation.

func TestPostgresMigrationsMatchSQLite(t *testing.T) {
	t.Parallel()
	names := func(dialect string) []string {
		ms, err := loadMigrations(dialect)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.name)
		}
		return out
	}
	if diff := cmp.Diff(names("sqlite"), names("postgres")); diff != "" {
		t.Errorf("migrations/postgres must translate migrations/sqlite one for one, numbered alike (-sqlite +postgres):\n%s", diff)
	}
}

func TestPostgresOpenTogether(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	// Replicas starting at once: one migrates, the others find nothing to do.
	const n = 4
	stores := make([]*Postgres, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = OpenPostgres(t.Context(), url) })
	}
	wg.Wait()
	var secret []byte
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer s.Close()
		b, err := s.ServerSecret(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if secret == nil {
			secret = b
		} else if string(b) != string(secret) {
			t.Errorf("store %d has another server secret", i)
		}
	}
	ms, err := loadMigrations("postgres")
	if err != nil {
		t.Fatal(err)
	}
	var rows, top int
	if err := stores[0].db.QueryRowContext(t.Context(), `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&rows, &top); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || top != len(ms) {
		t.Errorf("schema_migrations: %d rows, version %d; want %d and %d", rows, top, len(ms), len(ms))
	}
	// Reopening finds the schema current.
	s, err := OpenPostgres(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestPostgresPoolSize(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	for _, tt := range []struct {
		url  string
		want int
	}{
		{url, DefaultPostgresPool},
		{url + "&pool_max_conns=3", 3},
	} {
		s, err := OpenPostgres(t.Context(), tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.db.Stats().MaxOpenConnections; got != tt.want {
			t.Errorf("%s: pool of %d, want %d", tt.url, got, tt.want)
		}
		s.Close()
	}
	if _, err := OpenPostgres(t.Context(), url+"&pool_max_conns=0"); err == nil {
		t.Error("pool_max_conns=0 accepted")
	}
}

func TestPoolSizeParse(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, url string
		pool    int
	}{
		{"postgres://h/db", "postgres://h/db", DefaultPostgresPool},
		{"postgres://h/db?pool_max_conns=5", "postgres://h/db", 5},
		{"postgres://h/db?sslmode=disable&pool_max_conns=5&x=y", "postgres://h/db?sslmode=disable&x=y", 5},
		{"host=h pool_max_conns=7 dbname=db", "host=h dbname=db", 7},
	} {
		url, pool, err := poolSize(tt.in)
		if err != nil || url != tt.url || pool != tt.pool {
			t.Errorf("poolSize(%q) = %q, %d, %v; want %q, %d", tt.in, url, pool, err, tt.url, tt.pool)
		}
	}
}

func TestRebind(t *testing.T) {
	t.Parallel()
	d := &pgDialect{}
	for range 2 { // the second time from the cache
		got := d.rebind(`UPDATE t SET a = ?, b = ? WHERE id = ?`)
		if want := `UPDATE t SET a = $1, b = $2 WHERE id = $3`; got != want {
			t.Errorf("rebind = %q, want %q", got, want)
		}
	}
	if got, want := (sqliteDialect{}).rebind(`a = ?`), `a = ?`; got != want {
		t.Errorf("sqlite rebind = %q, want %q", got, want)
	}
}
