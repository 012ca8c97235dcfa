package store

import (
	"context"
	"fmt"
	"time"
)

// endedKeep is how long the records of ended processes stay once ended:
// a later end of the same sandbox drops older ones.
const endedKeep = 7 * 24 * time.Hour

// SetSandboxProcesses replaces the sandbox's listed processes (those not
// ended) with procs; ended records stay, and a listed process already
// ended is left as it is.
func (s *sqlStore) SetSandboxProcesses(ctx context.Context, sandboxID string, procs []SandboxProcess) error {
	return s.tx(ctx, func(tx *sqlTx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_processes WHERE sandbox_id = ? AND ended_at = 0`, sandboxID); err != nil {
			return fmt.Errorf("processes of sandbox %s: %w", sandboxID, err)
		}
		for _, p := range procs {
			if p.ID == "" {
				return fmt.Errorf("processes of sandbox %s: %w: a process without an id", sandboxID, ErrInvalid)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO sandbox_processes (sandbox_id, process_id, info) VALUES (?, ?, ?)
				ON CONFLICT (sandbox_id, process_id) DO NOTHING`, sandboxID, p.ID, string(p.Info))
			if s.d.isForeignKey(err) {
				return fmt.Errorf("processes of sandbox %s: %w", sandboxID, ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("processes of sandbox %s: %w", sandboxID, err)
			}
		}
		return nil
	})
}

// EndSandboxProcesses records that the sandbox's listed processes ended
// at `at`, for reason, and returns them; records ended more than
// endedKeep before go.
func (s *sqlStore) EndSandboxProcesses(ctx context.Context, sandboxID, reason string, at time.Time) ([]SandboxProcess, error) {
	var ended []SandboxProcess
	err := s.tx(ctx, func(tx *sqlTx) error {
		rows, err := tx.QueryContext(ctx, `SELECT process_id, info FROM sandbox_processes WHERE sandbox_id = ? AND ended_at = 0 ORDER BY process_id`, sandboxID)
		if err != nil {
			return err
		}
		ended = nil
		for rows.Next() {
			p := SandboxProcess{SandboxID: sandboxID, EndedAt: fromMicros(micros(at)), Reason: reason}
			var info string
			if err := rows.Scan(&p.ID, &info); err != nil {
				rows.Close()
				return err
			}
			p.Info = []byte(info)
			ended = append(ended, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sandbox_processes SET ended_at = ?, reason = ? WHERE sandbox_id = ? AND ended_at = 0`,
			micros(at), reason, sandboxID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM sandbox_processes WHERE sandbox_id = ? AND ended_at > 0 AND ended_at < ?`,
			sandboxID, micros(at.Add(-endedKeep)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("end the processes of sandbox %s: %w", sandboxID, err)
	}
	return ended, nil
}

// SandboxProcesses returns the sandbox's records: those ended first, in
// the order they ended, then those listed and not ended.
func (s *sqlStore) SandboxProcesses(ctx context.Context, sandboxID string) ([]SandboxProcess, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT process_id, info, ended_at, reason FROM sandbox_processes WHERE sandbox_id = ?
		ORDER BY CASE WHEN ended_at = 0 THEN 1 ELSE 0 END, ended_at, process_id`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("processes of sandbox %s: %w", sandboxID, err)
	}
	defer rows.Close()
	var out []SandboxProcess
	for rows.Next() {
		p := SandboxProcess{SandboxID: sandboxID}
		var info string
		var at int64
		if err := rows.Scan(&p.ID, &info, &at, &p.Reason); err != nil {
			return nil, fmt.Errorf("processes of sandbox %s: %w", sandboxID, err)
		}
		p.Info = []byte(info)
		if at != 0 {
			p.EndedAt = fromMicros(at)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// AcquireLease takes lease name for holder until now+ttl, or extends
// holder's own; false when another holder's has not expired.
func (s *sqlStore) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return false, fmt.Errorf("acquire lease %q: %w: need a name, a holder and a positive ttl", name, ErrInvalid)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?`, name, holder, micros(now.Add(ttl)), micros(now))
	if err != nil {
		return false, fmt.Errorf("acquire lease %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("acquire lease %q: %w", name, err)
	}
	return n > 0, nil
}

// ReleaseLease gives up holder's lease name; one another holder took
// since stays.
func (s *sqlStore) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return fmt.Errorf("release lease %q: %w", name, err)
	}
	return nil
}
