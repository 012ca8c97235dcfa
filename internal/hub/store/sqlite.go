package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite is the Store on an embedded SQLite database (modernc.org/sqlite,
// no cgo): the hub's default when one process serves everything.
type SQLite struct {
	db    *sql.DB
	stmts sync.Map // query text → *sql.Stmt (see stmt)
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
	s := &SQLite{db: db}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	for _, q := range txQueries {
		if _, err := s.stmt(ctx, q); err != nil {
			s.Close()
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
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
	secret := make([]byte, 32)
	rand.Read(secret)
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO server_secret (id, secret) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, secret)
	if err != nil {
		return fmt.Errorf("create server secret: %w", err)
	}
	return nil
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
	return s.tx(ctx, func(tx *sql.Tx) error {
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

// Close closes the database.
func (s *SQLite) Close() error {
	s.stmts.Range(func(_, st any) bool {
		st.(*sql.Stmt).Close()
		return true
	})
	return s.db.Close()
}

// stmt returns q prepared for the store's lifetime: database/sql prepares
// it once on each connection it runs on, instead of on every call. The
// queries every routed call makes go through it (preparing them on every
// call showed in the hub's CPU profile of exec calls).
func (s *SQLite) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.stmts.LoadOrStore(q, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// queryRow is QueryRowContext on q prepared once (see stmt).
func (s *SQLite) queryRow(ctx context.Context, q string, args ...any) scanner {
	st, err := s.stmt(ctx, q)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// errRow is a row that could not be queried.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// txStmt is q for use in tx: the statement prepared once (see stmt) if
// OpenSQLite prepared it, else prepared for this transaction only. Never
// prepares on the pool, which a transaction on the one connection of an
// in-memory store would wait for forever.
func (s *SQLite) txStmt(ctx context.Context, tx *sql.Tx, q string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(q); ok {
		return tx.StmtContext(ctx, st.(*sql.Stmt)), nil
	}
	return tx.PrepareContext(ctx, q)
}

// txQueries are the statements transactions run on every routed call's
// activity: OpenSQLite prepares them (see txStmt).
var txQueries = []string{qMachineOrg, qInsertActivity, qRaiseActivitySeq}

// ServerSecret returns the hub's HMAC secret.
func (s *SQLite) ServerSecret(ctx context.Context) ([]byte, error) {
	var b []byte
	if err := s.db.QueryRowContext(ctx, `SELECT secret FROM server_secret WHERE id = 1`).Scan(&b); err != nil {
		return nil, fmt.Errorf("read server secret: %w", notFound(err))
	}
	return b, nil
}

// tx runs fn in a transaction, committing if it returns nil.
func (s *SQLite) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// sqliteCode returns the extended result code of a SQLite error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isUnique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isForeignKey(err error) bool { return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY }

// notFound turns sql.ErrNoRows into ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// checkAffected returns ErrNotFound if the statement changed no row.
func checkAffected(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// idAlphabet has 32 characters, none of them 0, 1, l or o.
const idAlphabet = "abcdefghijkmnpqrstuvwxyz23456789"

// NewID returns prefix and 12 random characters (60 bits): the form of
// every id the hub makes ("m-…", "sb-…").
func NewID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[b[i]&31]
	}
	return prefix + string(b)
}

// Times are stored as microseconds since the epoch; NULL means zero.

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// needTime rejects a zero time where the store records one.
func needTime(what string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%w: zero %s", ErrInvalid, what)
	}
	return nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// collect scans every row with scan.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
