package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notify sends payload (at most 7,999 bytes) to every Listen on channel,
// in every process connected to the database (PostgreSQL's NOTIFY).
func (s *Postgres) Notify(ctx context.Context, channel, payload string) error {
	if len(payload) >= 8000 {
		return fmt.Errorf("notify %s: %w: payload of %d bytes", channel, ErrInvalid, len(payload))
	}
	if _, err := s.db.ExecContext(ctx, `SELECT pg_notify(?, ?)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Listen calls fn with every notification on the channels until ctx ends,
// one at a time, on a connection of its own (outside the pool). When that
// connection breaks it connects again (after a second) and calls fn with
// an empty payload on each channel, since notifications sent meanwhile were
// lost. ready, if not nil, is called once the first LISTEN is in place.
func (s *Postgres) Listen(ctx context.Context, channels []string, fn func(channel, payload string), ready func()) {
	for first := true; ctx.Err() == nil; first = false {
		err := s.listen(ctx, channels, fn, func() {
			if first && ready != nil {
				ready()
			}
			if !first {
				for _, ch := range channels {
					fn(ch, "")
				}
			}
		})
		if ctx.Err() != nil {
			return
		}
		_ = err // the caller learns of the gap through the empty payloads
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *Postgres) listen(ctx context.Context, channels []string, fn func(channel, payload string), up func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	up()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Channel, n.Payload)
	}
}
