package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// qTakeToken moves the key's full-at time one period later, from now if it
// lies in the past, unless that puts it more than a burst of periods ahead
// (no token left): then no row comes back. Arguments: key, now+every,
// then (now, now, every) twice, and now+burst*every.
const qTakeToken = `INSERT INTO rate_limits (key, full_at) VALUES (?, ?)
	ON CONFLICT (key) DO UPDATE
	SET full_at = CASE WHEN rate_limits.full_at > ? THEN rate_limits.full_at ELSE ? END + ?
	WHERE CASE WHEN rate_limits.full_at > ? THEN rate_limits.full_at ELSE ? END + ? <= ?
	RETURNING full_at`

// TakeToken spends one of key's tokens, if there is one.
func (s *sqlStore) TakeToken(ctx context.Context, key string, every time.Duration, burst int, at time.Time) (bool, time.Duration, error) {
	switch {
	case key == "" || len(key) > 200:
		return false, 0, fmt.Errorf("take token: %w: key of %d bytes", ErrInvalid, len(key))
	case every < time.Microsecond || burst < 1:
		return false, 0, fmt.Errorf("take token: %w: one token every %s, %d at once", ErrInvalid, every, burst)
	case at.IsZero():
		return false, 0, fmt.Errorf("take token: %w: zero time", ErrInvalid)
	}
	now, per := micros(at), every.Microseconds()
	limit := now + int64(burst)*per
	var full int64
	err := s.queryRow(ctx, qTakeToken, key, now+per, now, now, per, now, now, per, limit).Scan(&full)
	if err == nil {
		return true, 0, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, 0, fmt.Errorf("take token: %w", err)
	}
	// No token: the next one comes when taking it keeps full_at within the
	// burst.
	if err := s.queryRow(ctx, `SELECT full_at FROM rate_limits WHERE key = ?`, key).Scan(&full); err != nil {
		return false, 0, fmt.Errorf("take token: %w", notFound(err))
	}
	return false, time.Duration(max(full+per-limit, 1)) * time.Microsecond, nil
}

// ReturnToken gives back a token.
func (s *sqlStore) ReturnToken(ctx context.Context, key string, every time.Duration) error {
	_, err := s.db.ExecContext(ctx, `UPDATE rate_limits SET full_at = full_at - ? WHERE key = ?`, every.Microseconds(), key)
	if err != nil {
		return fmt.Errorf("return token: %w", err)
	}
	return nil
}

// DeleteRateLimits forgets full buckets.
func (s *sqlStore) DeleteRateLimits(ctx context.Context, at time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM rate_limits WHERE full_at <= ?`, micros(at))
	if err != nil {
		return 0, fmt.Errorf("delete rate limits: %w", err)
	}
	return res.RowsAffected()
}
