package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Postgres is the Store on a PostgreSQL database (github.com/jackc/pgx/v5),
// for several hub replicas that share state. It runs the same queries as
// SQLite (sqlStore; placeholders rewritten from ? to $n) on the same schema,
// translated in migrations/postgres with the same numbers.
//
// Every query is prepared once per connection: pgx's statement cache
// (QueryExecModeCacheStatement) prepares a query the first time a
// connection runs it and reuses it after. Transactions run SERIALIZABLE and
// are retried on a serialization failure or a deadlock, so the
// read-then-write methods (StartValidation, ClaimWarmSandbox) are as atomic
// as on SQLite, whose writers queue on one lock.
type Postgres struct {
	*sqlStore
	cfg *pgx.ConnConfig // for Listen's connections
}

var _ Store = (*Postgres)(nil)

// DefaultPostgresPool is the pool size OpenPostgres uses when the URL has
// no pool_max_conns: connections each hub replica may hold at once. A
// routed call makes one or two short queries, so 16 carries thousands of
// calls a second; with R replicas the server needs R×16 connections
// (PostgreSQL's default max_connections is 100: enough for five replicas
// and some room for administration).
const DefaultPostgresPool = 16

// OpenPostgres connects to the database at url (postgres://user:pass@host/db?…,
// or a key=value DSN) and brings its schema up to date. The URL's
// pool_max_conns sets the pool size (default DefaultPostgresPool); other
// parameters are libpq's (sslmode, connect_timeout, …).
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	if url == "" {
		return nil, fmt.Errorf("open store: %w: empty database URL", ErrInvalid)
	}
	// pgx would send pool_max_conns to the server as a setting: take it out.
	url, pool, err := poolSize(url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Postgres{sqlStore: newSQLStore(db, &pgDialect{}), cfg: cfg}
	if err := s.init(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", redact(cfg), err)
	}
	return s, nil
}

// poolSize takes pool_max_conns out of a URL or DSN.
func poolSize(url string) (string, int, error) {
	pool := DefaultPostgresPool
	cut := func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: pool_max_conns %q", ErrInvalid, v)
		}
		pool = n
		return nil
	}
	if strings.Contains(url, "://") {
		base, query, ok := strings.Cut(url, "?")
		if !ok {
			return url, pool, nil
		}
		var keep []string
		for _, kv := range strings.Split(query, "&") {
			if v, ok := strings.CutPrefix(kv, "pool_max_conns="); ok {
				if err := cut(v); err != nil {
					return "", 0, err
				}
				continue
			}
			keep = append(keep, kv)
		}
		if len(keep) == 0 {
			return base, pool, nil
		}
		return base + "?" + strings.Join(keep, "&"), pool, nil
	}
	var keep []string
	for _, kv := range strings.Fields(url) {
		if v, ok := strings.CutPrefix(kv, "pool_max_conns="); ok {
			if err := cut(v); err != nil {
				return "", 0, err
			}
			continue
		}
		keep = append(keep, kv)
	}
	return strings.Join(keep, " "), pool, nil
}

// redact names the database without its password.
func redact(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

func (s *Postgres) init(ctx context.Context) error {
	ms, err := loadMigrations("postgres")
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

// migrateLock is the advisory lock key replicas take to migrate one at a
// time ("agentd" in ASCII).
const migrateLock = 0x6167656e7464

// migrate applies the migrations the database lacks, all in one
// transaction (PostgreSQL's DDL is transactional): a failure leaves the
// schema as it was, and replicas starting together queue on an advisory
// lock, then find nothing to do.
func (s *Postgres) migrate(ctx context.Context, ms []migration) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(migrateLock)); err != nil {
		return fmt.Errorf("lock schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this agenthub knows (%d): upgrade agenthub", current, len(ms))
	}
	for _, m := range ms[current:] {
		// The raw *sql.Tx: migrations hold no placeholders to rewrite, and
		// pgx runs a query without arguments on the simple protocol, which
		// takes several statements at once.
		if _, err := tx.Tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("record migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	return tx.Commit()
}

// pgDialect is PostgreSQL's side of dialect.
type pgDialect struct {
	binds sync.Map // query with ? → query with $n
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func (*pgDialect) isUnique(err error) bool { return pgCode(err) == "23505" }

func (*pgDialect) isForeignKey(err error) bool { return pgCode(err) == "23503" }

func (*pgDialect) retryable(err error) bool {
	c := pgCode(err)
	return c == "40001" || c == "40P01" // serialization_failure, deadlock_detected
}

func (*pgDialect) txOptions() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelSerializable}
}

// prunePerOrg is false: one statement ranks every org's records (MVCC:
// readers do not wait for it).
func (*pgDialect) prunePerOrg() bool { return false }

// rebind rewrites the ? placeholders of q as $1, $2, …. The store's
// queries hold no ? inside literals or identifiers.
func (d *pgDialect) rebind(q string) string {
	if b, ok := d.binds.Load(q); ok {
		return b.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	d.binds.Store(q, b.String())
	return b.String()
}
