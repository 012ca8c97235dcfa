package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite is the Store on an embedded SQLite database (modernc.org/sqlite,
// no cgo): the hub's default when one process serves everything.
type SQLite struct {
	*sqlStore
}

var _ Store = (*SQLite)(nil)

// busyTimeout is how long a connection waits for another's write lock
// before giving up with SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// OpenSQLite opens the database at path, creating it with mode 0600 if
// needed, or a private in-memory one for ":memory:" (tests and demos), and
// brings its schema up to date.
//
// The connection runs in WAL mode (readers never wait for the writer) with
// synchronous=NORMAL (a power cut may lose the last commits, never corrupt
// the file), foreign keys enforced, a 5 s busy timeout, and every
// transaction begun IMMEDIATE, so two writers queue on the busy timeout
// instead of failing when one upgrades a read lock.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	if path == "" {
		return nil, fmt.Errorf("open store: %w: empty database path", ErrInvalid)
	}
	if path != ":memory:" {
		// The file holds token hashes and the pairing secret: create it
		// private (SQLite gives the -wal and -shm files the same mode).
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		f.Close()
	}
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if path == ":memory:" {
		// Every connection to :memory: is a database of its own: keep one.
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
	}
	s := &SQLite{newSQLStore(db, sqliteDialect{})}
	if err := s.init(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// sqliteDSN makes a URI filename for path with the connection settings.
func sqliteDSN(path string) string {
	// In a URI filename, '?' and '#' end the path and '%' starts an escape.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + strings.Join([]string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()),
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(NORMAL)",
		"_txlock=immediate",
	}, "&")
}

func (s *SQLite) init(ctx context.Context) error {
	if err := s.walMode(ctx); err != nil {
		return err
	}
	ms, err := loadMigrations("sqlite")
	if err != nil {
		return err
	}
	if err := s.migrate(ctx, ms); err != nil {
		return err
	}
	if err := s.createSecret(ctx); err != nil {
		return err
	}
	return s.prepare(ctx, txQueries...)
}

// walMode switches the file to WAL, which sticks to the file. The switch
// needs the file to itself and SQLite does not wait for that (no busy
// handler), so when several processes or connections open a new file at
// once it is retried here.
func (s *SQLite) walMode(ctx context.Context) error {
	deadline := time.Now().Add(busyTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var mode string
		err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		switch {
		case err == nil && (mode == "wal" || mode == "memory"):
			return nil
		case err == nil:
			return fmt.Errorf("journal mode is %q, not wal", mode)
		case sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline):
			return fmt.Errorf("set WAL mode: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// migrate applies the migrations the database lacks, all in one
// transaction: a failure leaves the schema as it was, and a second hub
// opening the same file at the same time waits, then finds nothing to do.
func (s *SQLite) migrate(ctx context.Context, ms []migration) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	return s.tx(ctx, func(tx *sqlTx) error {
		var current int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > len(ms) {
			return fmt.Errorf("database schema version %d is newer than this agenthub knows (%d): upgrade agenthub", current, len(ms))
		}
		for _, m := range ms[current:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("record migration %04d_%s: %w", m.version, m.name, err)
			}
		}
		return nil
	})
}

// sqliteDialect is SQLite's side of dialect.
type sqliteDialect struct{}

// rebind keeps ?: SQLite's own placeholder.
func (sqliteDialect) rebind(q string) string { return q }

// sqliteCode returns the extended result code of a SQLite error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func (sqliteDialect) isUnique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func (sqliteDialect) isForeignKey(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// retryable is false: writers queue on the busy timeout (transactions
// begin IMMEDIATE), so SQLite never aborts one for a conflict, and a
// SQLITE_BUSY after the 5 s wait is not worth waiting for again.
func (sqliteDialect) retryable(error) bool { return false }

// txOptions: the DSN's _txlock=immediate does what matters.
func (sqliteDialect) txOptions() *sql.TxOptions { return nil }

// prunePerOrg is true: the file has one write lock, held for a whole
// statement.
func (sqliteDialect) prunePerOrg() bool { return true }
