package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The conformance suite runs against SQLite in sqlite_suite_test.go (package
// store_test); these tests look inside the SQLite implementation.

func openTemp(t *testing.T) (*SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hub.db")
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestSQLitePragmas(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	ctx := t.Context()
	for _, tt := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
		{"synchronous", "1"}, // NORMAL
	} {
		// Ask on several connections: every one must have the settings.
		conns := make([]*sql.Conn, 3)
		for i := range conns {
			c, err := s.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conns[i] = c
		}
		for i, c := range conns {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("connection %d: PRAGMA %s = %q, want %q", i, tt.pragma, got, tt.want)
			}
		}
	}
}

func TestSQLiteFilesArePrivate(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	if _, err := s.CreateOrg(t.Context(), "acme", time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}

func TestSQLiteReopenIsIdempotent(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	ctx := t.Context()
	secret, err := s.ServerSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	org, err := s.CreateOrg(ctx, "acme", time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	for i := range 2 {
		s2, err := OpenSQLite(ctx, path)
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		var versions []int
		rows, err := s2.db.QueryContext(ctx, "SELECT version FROM schema_migrations ORDER BY version")
		versions, err = collect(rows, err, func(r scanner) (int, error) { var v int; return v, r.Scan(&v) })
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for _, m := range ms {
			want = append(want, m.version)
		}
		if diff := cmp.Diff(versions, want); diff != "" {
			t.Errorf("reopen %d: schema_migrations (-got +want):\n%s", i, diff)
		}
		got, err := s2.ServerSecret(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, secret); diff != "" {
			t.Errorf("reopen %d: the server secret changed (-got +want):\n%s", i, diff)
		}
		if o, err := s2.OrgByName(ctx, "acme"); err != nil || o.ID != org.ID {
			t.Errorf("reopen %d: OrgByName = %+v, %v; want %s", i, o, err, org.ID)
		}
		s2.Close()
	}
}

func TestSQLiteConcurrentOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hub.db")
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			s, err := OpenSQLite(t.Context(), path)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent open: %v", err)
		}
	}
}

func TestSQLiteRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	if _, err := s.db.ExecContext(t.Context(),
		"INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := OpenSQLite(t.Context(), path)
	if err == nil || !strings.Contains(err.Error(), "upgrade agenthub") {
		t.Errorf("open a newer schema: %v, want an error telling to upgrade", err)
	}
}

func TestSQLiteMigrationRollsBack(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	ms, err := loadMigrations("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	ms = append(ms,
		migration{version: len(ms) + 1, name: "good", sql: "CREATE TABLE extra (x INTEGER) STRICT"},
		migration{version: len(ms) + 2, name: "bad", sql: "CREATE TABLE broken ("},
	)
	if err := s.migrate(t.Context(), ms); err == nil || !strings.Contains(err.Error(), "_bad") {
		t.Fatalf("migrate with a broken step: %v, want an error naming it", err)
	}
	var n int
	if err := s.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'extra'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("the step before the broken one was kept: migrations must apply in one transaction")
	}
}

func TestSQLitePaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, path string
		wantErr    error
	}{
		{"memory", ":memory:", nil},
		{"odd characters", filepath.Join(dir, "a?b#c%20d.db"), nil},
		{"empty", "", ErrInvalid},
		{"missing directory", filepath.Join(dir, "no", "such", "hub.db"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := OpenSQLite(t.Context(), tt.path)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error %v, want %v", err, tt.wantErr)
				}
				return
			}
			if tt.name == "missing directory" {
				if err == nil {
					s.Close()
					t.Error("opened a database in a directory that does not exist")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.CreateOrg(t.Context(), "acme", time.Unix(1, 0)); err != nil {
				t.Error(err)
			}
			if tt.path != ":memory:" {
				if _, err := os.Stat(tt.path); err != nil {
					t.Errorf("the database is not at the path given: %v", err)
				}
			}
		})
	}
}
