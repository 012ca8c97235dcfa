package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ConsoleSessions stores the web console's sign-ins: server-side sessions
// and the hub owner's one-time sign-in links. Only SHA-256 hashes of
// session ids and link codes are stored (see HashToken).
type ConsoleSessions interface {
	// CreateConsoleSession stores s. ErrConflict if the hash is stored
	// already; ErrNotFound if the org, or the token s names, is unknown.
	CreateConsoleSession(ctx context.Context, s ConsoleSession) error
	// ConsoleSession returns the session with that id hash; ErrNotFound if
	// there is none or it expired at now. The caller checks the token it
	// names (revoked: the session is over).
	ConsoleSession(ctx context.Context, idHash TokenHash, now time.Time) (ConsoleSession, error)
	// DeleteConsoleSession deletes a session (sign-out); deleting a missing
	// one is not an error.
	DeleteConsoleSession(ctx context.Context, idHash TokenHash) error
	// SetConsoleSessionOrg makes orgID ("" for none) the org a live
	// session acts in. ErrNotFound if the session is gone or expired at
	// now, or the org is unknown. Who may switch is the caller's check.
	SetConsoleSessionOrg(ctx context.Context, idHash TokenHash, orgID string, now time.Time) error
	// CreateConsoleLink stores a one-time sign-in link. ErrConflict if the
	// hash is stored already; ErrNotFound if the org is unknown.
	CreateConsoleLink(ctx context.Context, l ConsoleLink) error
	// RedeemConsoleLink, in one transaction, marks the link used at `at`
	// and stores s in the link's org (s.OrgID is set from the link).
	// ErrNotFound if no link has that hash; ErrPrecondition (nothing
	// changes) if it was used or expired. Of concurrent calls, one wins.
	RedeemConsoleLink(ctx context.Context, linkHash TokenHash, at time.Time, s ConsoleSession) (ConsoleSession, error)
	// DeleteExpiredConsole deletes sessions and links that expired before
	// `before` and returns how many.
	DeleteExpiredConsole(ctx context.Context, before time.Time) (int64, error)
}

// ConsoleSession is a web console sign-in's stored form.
type ConsoleSession struct {
	IDHash TokenHash // SHA-256 of the session id the cookie holds
	OrgID  string
	// TokenHash is the API token signed in with; zero for a console link
	// (the hub owner, an admin of the hub's first org).
	TokenHash TokenHash
	Name      string // who, as shown: the token's name or the link's
	// ActingOrgID is the org the hub owner switched the session to; ""
	// for the session's own (OrgID). Set by SetConsoleSessionOrg only.
	ActingOrgID string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// ConsoleLink is a one-time console sign-in link's stored form.
type ConsoleLink struct {
	Hash      TokenHash // SHA-256 of the link's code
	OrgID     string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    time.Time // zero: not used
}

// consoleDB is what the console's queries need of the pool or a
// transaction (both take queries written with ?).
type consoleDB interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func checkConsoleSession(s ConsoleSession) error {
	switch {
	case s.IDHash == TokenHash{}:
		return fmt.Errorf("%w: no session id hash", ErrInvalid)
	case s.Name == "":
		return fmt.Errorf("%w: empty name", ErrInvalid)
	}
	if err := needTime("creation time", s.CreatedAt); err != nil {
		return err
	}
	if !s.ExpiresAt.After(s.CreatedAt) {
		return fmt.Errorf("%w: expiry %s is not after creation", ErrInvalid, s.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

func insertConsoleSession(ctx context.Context, db consoleDB, d dialect, s ConsoleSession) error {
	if err := checkConsoleSession(s); err != nil {
		return err
	}
	var tok any // NULL: a console link's session
	if s.TokenHash != (TokenHash{}) {
		tok = s.TokenHash[:]
	}
	_, err := db.ExecContext(ctx, `INSERT INTO console_sessions (sha256, org_id, token_sha256, name, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`, s.IDHash[:], s.OrgID, tok, s.Name, micros(s.CreatedAt), micros(s.ExpiresAt))
	switch {
	case d.isUnique(err):
		return fmt.Errorf("session id stored already: %w", ErrConflict)
	case d.isForeignKey(err):
		return fmt.Errorf("org %s or the session's token: %w", s.OrgID, ErrNotFound)
	}
	return err
}

func selectConsoleSession(ctx context.Context, db consoleDB, idHash TokenHash, now time.Time) (ConsoleSession, error) {
	var (
		s                ConsoleSession
		id, tok          []byte
		acting           sql.NullString
		created, expires int64
	)
	err := db.QueryRowContext(ctx, `SELECT sha256, org_id, token_sha256, name, created_at, expires_at, act_org_id
		FROM console_sessions WHERE sha256 = ? AND expires_at > ?`, idHash[:], micros(now)).
		Scan(&id, &s.OrgID, &tok, &s.Name, &created, &expires, &acting)
	if err != nil {
		return ConsoleSession{}, notFound(err)
	}
	copy(s.IDHash[:], id)
	copy(s.TokenHash[:], tok)
	s.ActingOrgID = acting.String
	s.CreatedAt, s.ExpiresAt = fromMicros(created), fromMicros(expires)
	return s, nil
}

func insertConsoleLink(ctx context.Context, db consoleDB, d dialect, l ConsoleLink) error {
	if l.Hash == (TokenHash{}) {
		return fmt.Errorf("%w: no link hash", ErrInvalid)
	}
	if err := needTime("creation time", l.CreatedAt); err != nil {
		return err
	}
	if !l.ExpiresAt.After(l.CreatedAt) {
		return fmt.Errorf("%w: expiry is not after creation", ErrInvalid)
	}
	_, err := db.ExecContext(ctx, `INSERT INTO console_links (sha256, org_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		l.Hash[:], l.OrgID, micros(l.CreatedAt), micros(l.ExpiresAt))
	switch {
	case d.isUnique(err):
		return fmt.Errorf("link stored already: %w", ErrConflict)
	case d.isForeignKey(err):
		return fmt.Errorf("org %s: %w", l.OrgID, ErrNotFound)
	}
	return err
}

// redeemConsoleLink runs inside the caller's transaction tx.
func redeemConsoleLink(ctx context.Context, tx consoleDB, d dialect, linkHash TokenHash, at time.Time, s ConsoleSession) (ConsoleSession, error) {
	err := tx.QueryRowContext(ctx, `UPDATE console_links SET used_at = ?
		WHERE sha256 = ? AND used_at IS NULL AND expires_at > ? RETURNING org_id`,
		micros(at), linkHash[:], micros(at)).Scan(&s.OrgID)
	if errors.Is(err, sql.ErrNoRows) {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM console_links WHERE sha256 = ?`, linkHash[:]).Scan(&n); err != nil {
			return ConsoleSession{}, err
		}
		if n == 0 {
			return ConsoleSession{}, fmt.Errorf("console link: %w", ErrNotFound)
		}
		return ConsoleSession{}, fmt.Errorf("console link was used or expired: %w", ErrPrecondition)
	}
	if err != nil {
		return ConsoleSession{}, err
	}
	s.TokenHash = TokenHash{}
	if err := insertConsoleSession(ctx, tx, d, s); err != nil {
		return ConsoleSession{}, err
	}
	s.CreatedAt, s.ExpiresAt = fromMicros(micros(s.CreatedAt)), fromMicros(micros(s.ExpiresAt))
	return s, nil
}

func deleteExpiredConsole(ctx context.Context, db consoleDB, before time.Time) (int64, error) {
	var total int64
	for _, q := range []string{`DELETE FROM console_sessions WHERE expires_at < ?`, `DELETE FROM console_links WHERE expires_at < ?`} {
		res, err := db.ExecContext(ctx, q, micros(before))
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

var _ ConsoleSessions = (*sqlStore)(nil)

// CreateConsoleSession stores a console session.
func (s *sqlStore) CreateConsoleSession(ctx context.Context, cs ConsoleSession) error {
	if err := insertConsoleSession(ctx, s.db, s.d, cs); err != nil {
		return fmt.Errorf("create console session: %w", err)
	}
	return nil
}

// ConsoleSession returns a live console session.
func (s *sqlStore) ConsoleSession(ctx context.Context, idHash TokenHash, now time.Time) (ConsoleSession, error) {
	cs, err := selectConsoleSession(ctx, s.db, idHash, now)
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("console session: %w", err)
	}
	return cs, nil
}

// DeleteConsoleSession deletes a console session.
func (s *sqlStore) DeleteConsoleSession(ctx context.Context, idHash TokenHash) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM console_sessions WHERE sha256 = ?`, idHash[:]); err != nil {
		return fmt.Errorf("delete console session: %w", err)
	}
	return nil
}

// CreateConsoleLink stores a one-time sign-in link.
func (s *sqlStore) CreateConsoleLink(ctx context.Context, l ConsoleLink) error {
	if err := insertConsoleLink(ctx, s.db, s.d, l); err != nil {
		return fmt.Errorf("create console link: %w", err)
	}
	return nil
}

// RedeemConsoleLink uses a link and stores the session it starts.
func (s *sqlStore) RedeemConsoleLink(ctx context.Context, linkHash TokenHash, at time.Time, cs ConsoleSession) (ConsoleSession, error) {
	var out ConsoleSession
	err := s.tx(ctx, func(tx *sqlTx) error {
		var err error
		out, err = redeemConsoleLink(ctx, tx, s.d, linkHash, at, cs)
		return err
	})
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("redeem console link: %w", err)
	}
	return out, nil
}

// DeleteExpiredConsole deletes expired console sessions and links.
func (s *sqlStore) DeleteExpiredConsole(ctx context.Context, before time.Time) (int64, error) {
	n, err := deleteExpiredConsole(ctx, s.db, before)
	if err != nil {
		return n, fmt.Errorf("delete expired console sessions: %w", err)
	}
	return n, nil
}

// SetConsoleSessionOrg switches the org a live console session acts in.
func (s *sqlStore) SetConsoleSessionOrg(ctx context.Context, idHash TokenHash, orgID string, now time.Time) error {
	var org any // NULL: the session's own org
	if orgID != "" {
		org = orgID
	}
	res, err := s.db.ExecContext(ctx, `UPDATE console_sessions SET act_org_id = ? WHERE sha256 = ? AND expires_at > ?`,
		org, idHash[:], micros(now))
	if s.d.isForeignKey(err) {
		return fmt.Errorf("console session org %s: %w", orgID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("console session org: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("console session org: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("console session: %w", ErrNotFound)
	}
	return nil
}
