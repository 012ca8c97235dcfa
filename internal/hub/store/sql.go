package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// sqlStore is the one implementation of Store on a SQL database. Its
// queries are written once, with ? placeholders and SQL both engines take;
// what differs between engines is behind dialect. SQLite and Postgres embed
// it and add only opening, connection settings and migrations.
//
// Times are BIGINT microseconds since the epoch (NULL: zero) on both
// engines, so the same scan code reads both and nothing depends on a
// driver's time conversion.
type sqlStore struct {
	db    pool
	d     dialect
	stmts sync.Map // query text → *sql.Stmt (see stmt)
}

// dialect is what one SQL engine does differently from another.
type dialect interface {
	// rebind rewrites a query written with ? placeholders into the
	// engine's own form.
	rebind(q string) string
	// isUnique reports whether err is a unique or primary-key violation.
	isUnique(err error) bool
	// isForeignKey reports whether err is a foreign-key violation.
	isForeignKey(err error) bool
	// retryable reports whether a transaction that failed with err may be
	// run again as it is (a serialization failure, a deadlock).
	retryable(err error) bool
	// txOptions are the options every read-write transaction begins with.
	txOptions() *sql.TxOptions
	// prunePerOrg says to prune activity with one statement per org
	// (short write locks) instead of one statement for every org.
	prunePerOrg() bool
}

// newSQLStore wraps db, whose queries d rebinds.
func newSQLStore(db *sql.DB, d dialect) *sqlStore {
	return &sqlStore{db: pool{DB: db, d: d}, d: d}
}

// createSecret makes the server secret once, the first time the store is
// opened.
func (s *sqlStore) createSecret(ctx context.Context) error {
	secret := make([]byte, 32)
	rand.Read(secret)
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO server_secret (id, secret) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, secret)
	if err != nil {
		return fmt.Errorf("create server secret: %w", err)
	}
	return nil
}

// ServerSecret returns the hub's HMAC secret.
func (s *sqlStore) ServerSecret(ctx context.Context) ([]byte, error) {
	var b []byte
	if err := s.queryRow(ctx, `SELECT secret FROM server_secret WHERE id = 1`).Scan(&b); err != nil {
		return nil, fmt.Errorf("read server secret: %w", notFound(err))
	}
	return b, nil
}

// Close closes the prepared statements and the database.
func (s *sqlStore) Close() error {
	s.stmts.Range(func(_, st any) bool {
		st.(*sql.Stmt).Close()
		return true
	})
	return s.db.Close()
}

// prepare prepares qs for the store's lifetime (see stmt).
func (s *sqlStore) prepare(ctx context.Context, qs ...string) error {
	for _, q := range qs {
		if _, err := s.stmt(ctx, q); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}

// stmt returns q prepared for the store's lifetime: database/sql prepares
// it once on each connection it runs on, instead of on every call. The
// queries every routed call makes go through it (preparing them on every
// call showed in the hub's CPU profile of exec calls).
func (s *sqlStore) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.DB.PrepareContext(ctx, s.d.rebind(q))
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
func (s *sqlStore) queryRow(ctx context.Context, q string, args ...any) scanner {
	st, err := s.stmt(ctx, q)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// errRow is a row that could not be queried.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// txStmt is q for use in tx: the statement prepared once (see stmt) if the
// store prepared it, else prepared for this transaction only. Never
// prepares on the pool, which a transaction on the one connection of an
// in-memory SQLite store would wait for forever.
func (s *sqlStore) txStmt(ctx context.Context, tx *sqlTx, q string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(q); ok {
		return tx.StmtContext(ctx, st.(*sql.Stmt)), nil
	}
	return tx.Tx.PrepareContext(ctx, s.d.rebind(q))
}

// txQueries are the statements transactions run on every routed call's
// activity: the Open functions prepare them (see txStmt).
var txQueries = []string{qMachineOrg, qInsertActivity, qRaiseActivitySeq}

// maxTxAttempts bounds the retries of a transaction that keeps losing to
// concurrent ones.
const maxTxAttempts = 20

// tx runs fn in a transaction, committing if it returns nil, and runs it
// again (up to maxTxAttempts) when the dialect says the failure is
// retryable. fn must not keep state across runs other than what it assigns
// afresh.
func (s *sqlStore) tx(ctx context.Context, fn func(*sqlTx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, fn)
		if !s.d.retryable(err) || attempt == maxTxAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Millisecond):
		}
	}
}

func (s *sqlStore) tryTx(ctx context.Context, fn func(*sqlTx) error) error {
	tx, err := s.db.BeginTx(ctx, s.d.txOptions())
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// pool is the database, with queries written with ? placeholders.
type pool struct {
	*sql.DB
	d dialect
}

func (db pool) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return db.DB.ExecContext(ctx, db.d.rebind(q), args...)
}

func (db pool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return db.DB.QueryContext(ctx, db.d.rebind(q), args...)
}

func (db pool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return db.DB.QueryRowContext(ctx, db.d.rebind(q), args...)
}

// BeginTx begins a transaction whose queries are written with ?.
func (db pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sqlTx, error) {
	tx, err := db.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &sqlTx{Tx: tx, d: db.d}, nil
}

// sqlTx is a transaction, with queries written with ? placeholders.
type sqlTx struct {
	*sql.Tx
	d dialect
}

func (tx *sqlTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return tx.Tx.ExecContext(ctx, tx.d.rebind(q), args...)
}

func (tx *sqlTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return tx.Tx.QueryContext(ctx, tx.d.rebind(q), args...)
}

func (tx *sqlTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return tx.Tx.QueryRowContext(ctx, tx.d.rebind(q), args...)
}

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

// boolInt is a bool as the 0/1 INTEGER columns store it.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
