package store

import (
	"context"
	"fmt"
	"time"
)

// RegisterReplica stores or updates a replica.
func (s *sqlStore) RegisterReplica(ctx context.Context, r Replica) error {
	if r.ID == "" || len(r.ID) > 64 || len(r.Addr) > 256 {
		return fmt.Errorf("register replica: %w: id %q, address of %d bytes", ErrInvalid, r.ID, len(r.Addr))
	}
	if err := needTime("start time", r.StartedAt); err != nil {
		return fmt.Errorf("register replica: %w", err)
	}
	if err := needTime("heartbeat", r.HeartbeatAt); err != nil {
		return fmt.Errorf("register replica: %w", err)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO replicas (id, addr, started_at, heartbeat_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
		r.ID, r.Addr, micros(r.StartedAt), micros(r.HeartbeatAt))
	if err != nil {
		return fmt.Errorf("register replica: %w", err)
	}
	return nil
}

// ReplicaHeartbeat records that the replica is alive.
func (s *sqlStore) ReplicaHeartbeat(ctx context.Context, id string, at time.Time) error {
	err := checkAffected(s.db.ExecContext(ctx, `UPDATE replicas SET heartbeat_at = ? WHERE id = ?`, micros(at), id))
	if err != nil {
		return fmt.Errorf("replica %s heartbeat: %w", id, err)
	}
	return nil
}

// ListReplicas returns the registered replicas.
func (s *sqlStore) ListReplicas(ctx context.Context) ([]Replica, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, addr, started_at, heartbeat_at FROM replicas ORDER BY id`)
	rs, err := collect(rows, err, func(r scanner) (Replica, error) {
		var (
			rep           Replica
			started, beat int64
		)
		if err := r.Scan(&rep.ID, &rep.Addr, &started, &beat); err != nil {
			return Replica{}, err
		}
		rep.StartedAt, rep.HeartbeatAt = fromMicros(started), fromMicros(beat)
		return rep, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return rs, nil
}

// DeleteReplica deletes a replica and its routes.
func (s *sqlStore) DeleteReplica(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM replicas WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete replica %s: %w", id, err)
	}
	return nil
}

// ExpireReplicas deletes the replicas silent since before.
func (s *sqlStore) ExpireReplicas(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM replicas WHERE heartbeat_at < ?`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("expire replicas: %w", err)
	}
	return res.RowsAffected()
}

// SetRoute records that the replica holds the machine's tunnel.
func (s *sqlStore) SetRoute(ctx context.Context, machineID, replicaID string, at time.Time) error {
	if machineID == "" {
		return fmt.Errorf("set route: %w: no machine", ErrInvalid)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO routes (machine_id, replica_id, since) VALUES (?, ?, ?)
		ON CONFLICT (machine_id) DO UPDATE SET replica_id = excluded.replica_id, since = excluded.since`,
		machineID, replicaID, micros(at))
	switch {
	case s.d.isForeignKey(err):
		return fmt.Errorf("set route: replica %s: %w", replicaID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("set route: %w", err)
	}
	return nil
}

// DeleteRoute deletes the machine's route if the replica holds it.
func (s *sqlStore) DeleteRoute(ctx context.Context, machineID, replicaID string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM routes WHERE machine_id = ? AND replica_id = ?`, machineID, replicaID)
	if err != nil {
		return fmt.Errorf("delete route: %w", err)
	}
	return nil
}

// qRoute is the lookup a call for a machine on another replica makes.
const qRoute = `SELECT r.replica_id, p.addr, r.since FROM routes r JOIN replicas p ON p.id = r.replica_id
	WHERE r.machine_id = ? AND p.heartbeat_at >= ?`

// Route returns the machine's route through a live replica.
func (s *sqlStore) Route(ctx context.Context, machineID string, aliveSince time.Time) (Route, error) {
	r := Route{MachineID: machineID}
	var since int64
	if err := s.queryRow(ctx, qRoute, machineID, micros(aliveSince)).Scan(&r.ReplicaID, &r.Addr, &since); err != nil {
		return Route{}, fmt.Errorf("route of machine %s: %w", machineID, notFound(err))
	}
	r.Since = fromMicros(since)
	return r, nil
}

// ListRoutes returns the org's machines' live routes.
func (s *sqlStore) ListRoutes(ctx context.Context, orgID string, aliveSince time.Time) ([]Route, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.machine_id, r.replica_id, p.addr, r.since
		FROM routes r JOIN replicas p ON p.id = r.replica_id JOIN machines m ON m.id = r.machine_id
		WHERE m.org_id = ? AND p.heartbeat_at >= ? ORDER BY r.machine_id`, orgID, micros(aliveSince))
	rs, err := collect(rows, err, func(sc scanner) (Route, error) {
		var (
			r     Route
			since int64
		)
		if err := sc.Scan(&r.MachineID, &r.ReplicaID, &r.Addr, &since); err != nil {
			return Route{}, err
		}
		r.Since = fromMicros(since)
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	return rs, nil
}
