package store

import (
	"context"
	"fmt"
	"time"
)

var _ ConsoleSessions = (*Postgres)(nil)

var pgClass = sqlClass{unique: pgUnique, foreignKey: pgForeignKey}

// CreateConsoleSession stores a console session.
func (s *Postgres) CreateConsoleSession(ctx context.Context, cs ConsoleSession) error {
	if err := insertConsoleSession(ctx, s.db, pgClass, cs); err != nil {
		return fmt.Errorf("create console session: %w", err)
	}
	return nil
}

// ConsoleSession returns a live console session.
func (s *Postgres) ConsoleSession(ctx context.Context, idHash TokenHash, now time.Time) (ConsoleSession, error) {
	cs, err := selectConsoleSession(ctx, s.db, idHash, now)
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("console session: %w", err)
	}
	return cs, nil
}

// DeleteConsoleSession deletes a console session.
func (s *Postgres) DeleteConsoleSession(ctx context.Context, idHash TokenHash) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM console_sessions WHERE sha256 = ?`, idHash[:]); err != nil {
		return fmt.Errorf("delete console session: %w", err)
	}
	return nil
}

// CreateConsoleLink stores a one-time sign-in link.
func (s *Postgres) CreateConsoleLink(ctx context.Context, l ConsoleLink) error {
	if err := insertConsoleLink(ctx, s.db, pgClass, l); err != nil {
		return fmt.Errorf("create console link: %w", err)
	}
	return nil
}

// RedeemConsoleLink uses a link and stores the session it starts.
func (s *Postgres) RedeemConsoleLink(ctx context.Context, linkHash TokenHash, at time.Time, cs ConsoleSession) (ConsoleSession, error) {
	var out ConsoleSession
	err := s.tx(ctx, func(tx *pgTx) error {
		var err error
		out, err = redeemConsoleLink(ctx, tx, pgClass, linkHash, at, cs)
		return err
	})
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("redeem console link: %w", err)
	}
	return out, nil
}

// DeleteExpiredConsole deletes expired console sessions and links.
func (s *Postgres) DeleteExpiredConsole(ctx context.Context, before time.Time) (int64, error) {
	n, err := deleteExpiredConsole(ctx, s.db, before)
	if err != nil {
		return n, fmt.Errorf("delete expired console sessions: %w", err)
	}
	return n, nil
}
