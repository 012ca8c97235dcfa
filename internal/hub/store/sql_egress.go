package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// joinAllow is a list as stored: entries joined by commas (no entry holds
// one).
func joinAllow(allow []string) string { return strings.Join(allow, ",") }

func splitAllow(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// CreateSandboxEgress stores a new sandbox's allow list at generation 1.
func (s *sqlStore) CreateSandboxEgress(ctx context.Context, id string, allow []string, at time.Time) (SandboxEgress, error) {
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_egress (sandbox_id, allow, generation, cut_generation, changed_at)
		VALUES (?, ?, 1, 0, ?)`, id, joinAllow(allow), micros(at))
	switch {
	case s.d.isForeignKey(err):
		return SandboxEgress{}, fmt.Errorf("allow list of sandbox %s: %w", id, ErrNotFound)
	case s.d.isUnique(err):
		return SandboxEgress{}, fmt.Errorf("allow list of sandbox %s: %w", id, ErrConflict)
	case err != nil:
		return SandboxEgress{}, fmt.Errorf("allow list of sandbox %s: %w", id, err)
	}
	return SandboxEgress{Allow: append([]string{}, allow...), Gen: 1, ChangedAt: fromMicros(micros(at))}, nil
}

// SandboxEgress returns a sandbox's allow list.
func (s *sqlStore) SandboxEgress(ctx context.Context, id string) (SandboxEgress, error) {
	var allow string
	var e SandboxEgress
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT allow, generation, cut_generation, changed_at FROM sandbox_egress WHERE sandbox_id = ?`, id).
		Scan(&allow, &e.Gen, &e.CutGen, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return SandboxEgress{}, fmt.Errorf("allow list of sandbox %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return SandboxEgress{}, fmt.Errorf("allow list of sandbox %s: %w", id, err)
	}
	e.Allow, e.ChangedAt = splitAllow(allow), fromMicros(at)
	return e, nil
}

// ChangeSandboxEgress replaces generation gen's list.
func (s *sqlStore) ChangeSandboxEgress(ctx context.Context, id string, gen int64, allow []string, cut bool, at time.Time) (SandboxEgress, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sandbox_egress SET allow = ?, generation = generation + 1,
		cut_generation = CASE WHEN ? THEN generation + 1 ELSE cut_generation END, changed_at = ?
		WHERE sandbox_id = ? AND generation = ?`, joinAllow(allow), cut, micros(at), id, gen)
	if err := checkAffected(res, err); errors.Is(err, ErrNotFound) {
		if _, gerr := s.SandboxEgress(ctx, id); gerr != nil {
			return SandboxEgress{}, gerr
		}
		return SandboxEgress{}, fmt.Errorf("allow list of sandbox %s: generation %d %w: it changed meanwhile", id, gen, ErrConflict)
	} else if err != nil {
		return SandboxEgress{}, fmt.Errorf("allow list of sandbox %s: %w", id, err)
	}
	return s.SandboxEgress(ctx, id)
}

// SetEnvironmentAllow stores an environment's allow list.
func (s *sqlStore) SetEnvironmentAllow(ctx context.Context, orgID, env string, allow []string) error {
	if env == "" {
		return fmt.Errorf("set environment allow list: %w: no environment", ErrInvalid)
	}
	if len(allow) == 0 {
		_, err := s.db.ExecContext(ctx, `DELETE FROM environment_egress WHERE org_id = ? AND environment = ?`, orgID, env)
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO environment_egress (org_id, environment, allow) VALUES (?, ?, ?)
		ON CONFLICT (org_id, environment) DO UPDATE SET allow = excluded.allow`, orgID, env, joinAllow(allow))
	if s.d.isForeignKey(err) {
		return fmt.Errorf("set environment allow list: org %s: %w", orgID, ErrNotFound)
	}
	return err
}

// EnvironmentAllow returns an environment's allow list.
func (s *sqlStore) EnvironmentAllow(ctx context.Context, orgID, env string) ([]string, error) {
	var allow string
	err := s.db.QueryRowContext(ctx, `SELECT allow FROM environment_egress WHERE org_id = ? AND environment = ?`, orgID, env).Scan(&allow)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("allow list of environment %s: %w", env, err)
	}
	return splitAllow(allow), nil
}
