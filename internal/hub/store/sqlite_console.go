package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

var _ ConsoleSessions = (*SQLite)(nil)

var sqliteClass = sqlClass{unique: isUnique, foreignKey: isForeignKey}

// CreateConsoleSession stores a console session.
func (s *SQLite) CreateConsoleSession(ctx context.Context, cs ConsoleSession) error {
	if err := insertConsoleSession(ctx, s.db, sqliteClass, cs); err != nil {
		return fmt.Errorf("create console session: %w", err)
	}
	return nil
}

// ConsoleSession returns a live console session.
func (s *SQLite) ConsoleSession(ctx context.Context, idHash TokenHash, now time.Time) (ConsoleSession, error) {
	cs, err := selectConsoleSession(ctx, s.db, idHash, now)
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("console session: %w", err)
	}
	return cs, nil
}

// DeleteConsoleSession deletes a console session.
func (s *SQLite) DeleteConsoleSession(ctx context.Context, idHash TokenHash) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM console_sessions WHERE sha256 = ?`, idHash[:]); err != nil {
		return fmt.Errorf("delete console session: %w", err)
	}
	return nil
}

// CreateConsoleLink stores a one-time sign-in link.
func (s *SQLite) CreateConsoleLink(ctx context.Context, l ConsoleLink) error {
	if err := insertConsoleLink(ctx, s.db, sqliteClass, l); err != nil {
		return fmt.Errorf("create console link: %w", err)
	}
	return nil
}

// RedeemConsoleLink uses a link and stores the session it starts.
func (s *SQLite) RedeemConsoleLink(ctx context.Context, linkHash TokenHash, at time.Time, cs ConsoleSession) (ConsoleSession, error) {
	var out ConsoleSession
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = redeemConsoleLink(ctx, tx, sqliteClass, linkHash, at, cs)
		return err
	})
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("redeem console link: %w", err)
	}
	return out, nil
}

// DeleteExpiredConsole deletes expired console sessions and links.
func (s *SQLite) DeleteExpiredConsole(ctx context.Context, before time.Time) (int64, error) {
	n, err := deleteExpiredConsole(ctx, s.db, before)
	if err != nil {
		return n, fmt.Errorf("delete expired console sessions: %w", err)
	}
	return n, nil
}
