package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

const (
	qMachineOrg     = `SELECT org_id, activity_seq FROM machines WHERE id = ?`
	qInsertActivity = `INSERT INTO activity (org_id, machine_id, seq, at, record, source, subject, size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (machine_id, seq) DO NOTHING`
	qRaiseActivitySeq = `UPDATE machines SET activity_seq = ? WHERE id = ? AND activity_seq = ?`
)

// AppendActivity stores the machine's records; duplicates are skipped.
func (s *sqlStore) AppendActivity(ctx context.Context, machineID string, recs []Activity) error {
	for _, r := range recs {
		switch {
		case r.Seq == 0 || r.Seq > math.MaxInt64:
			return fmt.Errorf("append activity: %w: sequence number %d", ErrInvalid, r.Seq)
		case r.Time.IsZero():
			return fmt.Errorf("append activity: %w: record %d has no time", ErrInvalid, r.Seq)
		case !json.Valid(r.Record):
			return fmt.Errorf("append activity: %w: record %d is not JSON", ErrInvalid, r.Seq)
		case r.Source != "" && r.Source != SourceHub && r.Source != SourceDaemon:
			return fmt.Errorf("append activity: %w: record %d: source %q", ErrInvalid, r.Seq, r.Source)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sqlTx) error {
		sel, err := s.txStmt(ctx, tx, qMachineOrg)
		if err != nil {
			return err
		}
		var (
			orgID string
			was   int64
		)
		if err := sel.QueryRowContext(ctx, machineID).Scan(&orgID, &was); err != nil {
			return fmt.Errorf("machine %s: %w", machineID, notFound(err))
		}
		ins, err := s.txStmt(ctx, tx, qInsertActivity)
		if err != nil {
			return err
		}
		cursor := uint64(was)
		for _, r := range recs {
			source, subject := r.Source, r.Subject
			if source == "" {
				source = SourceDaemon
			}
			if subject == "" {
				subject = machineID
			}
			if _, err := ins.ExecContext(ctx, orgID, machineID, int64(r.Seq), micros(r.Time), string(r.Record),
				source, subject, int64(len(r.Record))); err != nil {
				return err
			}
			// The cursor advances by one only: a jump is stored, not
			// trusted. The first record numbers where the machine starts
			// (a new daemon's log starts at the time in microseconds).
			if r.Seq == cursor+1 || cursor == 0 {
				cursor = r.Seq
			}
		}
		if cursor == uint64(was) {
			return nil
		}
		upd, err := s.txStmt(ctx, tx, qRaiseActivitySeq)
		if err != nil {
			return err
		}
		_, err = upd.ExecContext(ctx, int64(cursor), machineID, was)
		return err
	})
	if err != nil {
		return fmt.Errorf("append activity: %w", err)
	}
	return nil
}

// LastSeq returns the machine's cursor (see ActivityLog).
func (s *sqlStore) LastSeq(ctx context.Context, machineID string) (uint64, error) {
	var seq int64
	err := s.queryRow(ctx, `SELECT activity_seq FROM machines WHERE id = ?`, machineID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("last activity of machine %s: %w", machineID, notFound(err))
	}
	return uint64(seq), nil
}

func scanActivity(r scanner) (Activity, error) {
	var (
		a      Activity
		seq    int64
		at     int64
		record string
	)
	if err := r.Scan(&a.ID, &a.OrgID, &a.MachineID, &seq, &at, &record, &a.Source, &a.Subject); err != nil {
		return Activity{}, err
	}
	a.Seq, a.Time, a.Record = uint64(seq), fromMicros(at), json.RawMessage(record)
	return a, nil
}

// ListActivity returns the records q selects, oldest first.
func (s *sqlStore) ListActivity(ctx context.Context, q ActivityQuery) ([]Activity, error) {
	if q.OrgID == "" {
		return nil, fmt.Errorf("list activity: %w: no org", ErrInvalid)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultActivityLimit
	}
	limit = min(limit, MaxActivityLimit)
	query := `SELECT id, org_id, machine_id, seq, at, record, source, subject FROM activity WHERE org_id = ? AND id > ?`
	args := []any{q.OrgID, q.AfterID}
	if q.MachineID != "" {
		query += ` AND subject = ?`
		args = append(args, q.MachineID)
	}
	if q.Newest {
		query += ` ORDER BY id DESC LIMIT ?`
	} else {
		query += ` ORDER BY id LIMIT ?`
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, query, args...)
	as, err := collect(rows, err, scanActivity)
	if err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	if q.Newest {
		slices.Reverse(as)
	}
	return as, nil
}

// PruneActivity applies the retention limits.
func (s *sqlStore) PruneActivity(ctx context.Context, keepPerOrg int, keepBytesPerOrg int64, before time.Time) (int64, error) {
	if keepPerOrg < 0 || keepBytesPerOrg < 0 {
		return 0, fmt.Errorf("prune activity: %w: keep %d records, %d bytes", ErrInvalid, keepPerOrg, keepBytesPerOrg)
	}
	var total int64
	del := func(query string, args ...any) error {
		res, err := s.db.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		total += n
		return err
	}
	if !before.IsZero() {
		if err := del(`DELETE FROM activity WHERE at < ?`, micros(before)); err != nil {
			return total, fmt.Errorf("prune activity: %w", err)
		}
	}
	if keepBytesPerOrg > 0 {
		// Each org's newest records while their sizes add up to at most
		// keepBytesPerOrg; the older ones go.
		err := del(`DELETE FROM activity WHERE id IN (
			SELECT id FROM (
				SELECT id, sum(size) OVER (PARTITION BY org_id ORDER BY id DESC) AS total FROM activity
			) ranked WHERE total > ?)`, keepBytesPerOrg)
		if err != nil {
			return total, fmt.Errorf("prune activity by size: %w", err)
		}
	}
	if keepPerOrg > 0 && !s.d.prunePerOrg() {
		// Every org at once: rank each org's records newest first and
		// delete those past keepPerOrg.
		err := del(`DELETE FROM activity WHERE id IN (
			SELECT id FROM (
				SELECT id, row_number() OVER (PARTITION BY org_id ORDER BY id DESC) AS n FROM activity
			) ranked WHERE n > ?)`, keepPerOrg)
		if err != nil {
			return total, fmt.Errorf("prune activity: %w", err)
		}
		return total, nil
	}
	if keepPerOrg > 0 {
		orgs, err := s.ListOrgs(ctx)
		if err != nil {
			return total, fmt.Errorf("prune activity: %w", err)
		}
		// One statement per org keeps each write transaction short.
		for _, o := range orgs {
			err := del(`DELETE FROM activity WHERE org_id = ? AND id <= (
				SELECT id FROM activity WHERE org_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
				o.ID, o.ID, keepPerOrg)
			if err != nil {
				return total, fmt.Errorf("prune activity of org %s: %w", o.Name, err)
			}
		}
	}
	return total, nil
}
