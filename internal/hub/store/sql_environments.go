package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

const environmentColumns = `org_id, name, image, network, state, pinned, reason, report, inventory, running, generation, created_at, updated_at, workspace_max, isolation`

func scanEnvironment(r scanner) (Environment, error) {
	var (
		e                 Environment
		report, inventory string
		created, updated  int64
	)
	err := r.Scan(&e.OrgID, &e.Name, &e.Image, &e.Network, &e.State, &e.Pinned, &e.Reason, &report, &inventory,
		&e.Running, &e.Generation, &created, &updated, &e.WorkspaceMax, &e.Isolation)
	if err != nil {
		return Environment{}, notFound(err)
	}
	e.Report, e.Inventory = rawJSON(report), rawJSON(inventory)
	e.CreatedAt, e.UpdatedAt = fromMicros(created), fromMicros(updated)
	return e, nil
}

// rawJSON returns stored JSON, nil for JSON null.
func rawJSON(s string) json.RawMessage {
	if s == "" || s == "null" {
		return nil
	}
	return json.RawMessage(s)
}

// jsonText returns m as stored text, "null" for none; ErrInvalid when m is
// not JSON.
func jsonText(what string, m json.RawMessage) (string, error) {
	if len(m) == 0 {
		return "null", nil
	}
	if !json.Valid(m) {
		return "", fmt.Errorf("%w: %s is not JSON", ErrInvalid, what)
	}
	return string(m), nil
}

func validNetwork(n string) bool { return n == "public" || n == "none" }

func validIsolation(i string) bool { return i == "runc" || i == "gvisor" }

// CreateEnvironment stores a new custom image environment, validating.
func (s *sqlStore) CreateEnvironment(ctx context.Context, e Environment) (Environment, error) {
	switch {
	case e.OrgID == "" || e.Name == "" || e.Image == "":
		return Environment{}, fmt.Errorf("create environment: %w: org, name and image are required", ErrInvalid)
	case !validNetwork(e.Network):
		return Environment{}, fmt.Errorf("create environment: %w: network %q", ErrInvalid, e.Network)
	case e.WorkspaceMax < 0:
		return Environment{}, fmt.Errorf("create environment: %w: workspace size %d", ErrInvalid, e.WorkspaceMax)
	case e.Isolation != "" && !validIsolation(e.Isolation):
		return Environment{}, fmt.Errorf("create environment: %w: isolation %q", ErrInvalid, e.Isolation)
	}
	if e.Isolation == "" {
		e.Isolation = "runc"
	}
	if err := needTime("creation time", e.CreatedAt); err != nil {
		return Environment{}, fmt.Errorf("create environment: %w", err)
	}
	e.CreatedAt = fromMicros(micros(e.CreatedAt))
	e.UpdatedAt = e.CreatedAt
	e.State, e.Pinned, e.Report, e.Inventory, e.Running, e.Generation = EnvValidating, "", nil, nil, "create", 1
	_, err := s.db.ExecContext(ctx, `INSERT INTO environments (org_id, name, image, network, state, reason, running, generation, created_at, updated_at, workspace_max, isolation)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.OrgID, e.Name, e.Image, e.Network, e.State, e.Reason, e.Running, e.Generation, micros(e.CreatedAt), micros(e.UpdatedAt), e.WorkspaceMax, e.Isolation)
	switch {
	case s.d.isUnique(err):
		return Environment{}, fmt.Errorf("create environment %s: %w: the name is taken", e.Name, ErrConflict)
	case s.d.isForeignKey(err):
		return Environment{}, fmt.Errorf("create environment: org %s: %w", e.OrgID, ErrNotFound)
	case err != nil:
		return Environment{}, fmt.Errorf("create environment: %w", err)
	}
	return e, nil
}

// Environment returns one of the org's environments.
func (s *sqlStore) Environment(ctx context.Context, orgID, name string) (Environment, error) {
	return s.environment(ctx, s.db, orgID, name)
}

func (s *sqlStore) environment(ctx context.Context, q querier, orgID, name string) (Environment, error) {
	e, err := scanEnvironment(q.QueryRowContext(ctx, `SELECT `+environmentColumns+` FROM environments WHERE org_id = ? AND name = ?`, orgID, name))
	if err != nil {
		return Environment{}, fmt.Errorf("environment %s: %w", name, err)
	}
	return e, nil
}

// ListEnvironments returns the org's environments by name.
func (s *sqlStore) ListEnvironments(ctx context.Context, orgID string) ([]Environment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+environmentColumns+` FROM environments WHERE org_id = ? ORDER BY name`, orgID)
	es, err := collect(rows, err, scanEnvironment)
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	return es, nil
}

// ListValidating returns every environment with a validation running.
func (s *sqlStore) ListValidating(ctx context.Context) ([]Environment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+environmentColumns+` FROM environments WHERE running <> '' ORDER BY org_id, name`)
	es, err := collect(rows, err, scanEnvironment)
	if err != nil {
		return nil, fmt.Errorf("list validating environments: %w", err)
	}
	return es, nil
}

// StartValidation starts an update or a revalidation, if none is running.
func (s *sqlStore) StartValidation(ctx context.Context, orgID, name, kind string, at time.Time) (Environment, error) {
	if kind != "update" && kind != "revalidate" {
		return Environment{}, fmt.Errorf("start validation: %w: kind %q", ErrInvalid, kind)
	}
	if err := needTime("start time", at); err != nil {
		return Environment{}, fmt.Errorf("start validation: %w", err)
	}
	var out Environment
	err := s.tx(ctx, func(tx *sqlTx) error {
		e, err := s.environment(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		if e.Running != "" {
			return fmt.Errorf("environment %s: %w: a validation (%s) is running since %s", name, ErrPrecondition, e.Running, e.UpdatedAt.Format(time.RFC3339))
		}
		if kind == "revalidate" && e.Pinned == "" {
			kind = "update" // nothing pinned: pull the reference again
		}
		e.Running, e.Generation, e.UpdatedAt = kind, e.Generation+1, fromMicros(micros(at))
		if kind == "update" {
			e.State, e.Pinned, e.Report, e.Inventory = EnvValidating, "", nil, nil
		}
		e.Reason = "validation queued"
		_, err = tx.ExecContext(ctx, `UPDATE environments SET state = ?, pinned = ?, reason = ?, report = coalesce(?, report), inventory = coalesce(?, inventory),
			running = ?, generation = ?, updated_at = ? WHERE org_id = ? AND name = ?`,
			e.State, e.Pinned, e.Reason, nullIf(kind == "update", "null"), nullIf(kind == "update", "null"),
			e.Running, e.Generation, micros(e.UpdatedAt), orgID, name)
		out = e
		return err
	})
	if err != nil {
		return Environment{}, fmt.Errorf("start validation: %w", err)
	}
	return out, nil
}

// nullIf returns v when cond holds, else SQL NULL.
func nullIf(cond bool, v string) any {
	if cond {
		return v
	}
	return nil
}

// SetValidationReason records progress of the current run.
func (s *sqlStore) SetValidationReason(ctx context.Context, orgID, name string, generation int64, reason string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE environments SET reason = ?, updated_at = ? WHERE org_id = ? AND name = ? AND generation = ? AND running <> ''`,
		reason, micros(at), orgID, name, generation)
	if err := checkAffected(res, err); err != nil {
		if err == ErrNotFound {
			err = fmt.Errorf("%w: the validation was superseded", ErrPrecondition)
		}
		return fmt.Errorf("environment %s: %w", name, err)
	}
	return nil
}

// FinishValidation stores the outcome of the current run.
func (s *sqlStore) FinishValidation(ctx context.Context, orgID, name string, generation int64, r Environment, at time.Time) (Environment, error) {
	switch r.State {
	case EnvReady, EnvRejected:
	default:
		return Environment{}, fmt.Errorf("finish validation: %w: state %q", ErrInvalid, r.State)
	}
	report, err := jsonText("report", r.Report)
	if err != nil {
		return Environment{}, fmt.Errorf("finish validation: %w", err)
	}
	inventory, err := jsonText("inventory", r.Inventory)
	if err != nil {
		return Environment{}, fmt.Errorf("finish validation: %w", err)
	}
	var out Environment
	err = s.tx(ctx, func(tx *sqlTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE environments SET state = ?, pinned = ?, reason = ?, report = ?, inventory = ?, running = '', updated_at = ?
			WHERE org_id = ? AND name = ? AND generation = ? AND running <> ''`,
			r.State, r.Pinned, r.Reason, report, inventory, micros(at), orgID, name, generation)
		if err := checkAffected(res, err); err != nil {
			if err == ErrNotFound {
				return fmt.Errorf("%w: the validation was superseded", ErrPrecondition)
			}
			return err
		}
		out, err = s.environment(ctx, tx, orgID, name)
		return err
	})
	if err != nil {
		return Environment{}, fmt.Errorf("finish validation of %s: %w", name, err)
	}
	return out, nil
}

// DeleteEnvironment deletes one of the org's environments.
func (s *sqlStore) DeleteEnvironment(ctx context.Context, orgID, name string) error {
	return s.tx(ctx, func(tx *sqlTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM environments WHERE org_id = ? AND name = ?`, orgID, name)
		if err := checkAffected(res, err); err != nil {
			return fmt.Errorf("delete environment %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM environment_egress WHERE org_id = ? AND environment = ?`, orgID, name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_policies WHERE org_id = ? AND environment = ?`, orgID, name); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM org_defaults WHERE org_id = ? AND environment = ?`, orgID, name)
		return err
	})
}

// SetDefaultEnvironment makes name the org's default.
func (s *sqlStore) SetDefaultEnvironment(ctx context.Context, orgID, name string) error {
	if name == "" {
		return fmt.Errorf("set default environment: %w: no name", ErrInvalid)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO org_defaults (org_id, environment) VALUES (?, ?)
		ON CONFLICT (org_id) DO UPDATE SET environment = excluded.environment`, orgID, name)
	if s.d.isForeignKey(err) {
		return fmt.Errorf("set default environment: org %s: %w", orgID, ErrNotFound)
	}
	return err
}

// DefaultEnvironment returns the org's default, "" when none was set.
func (s *sqlStore) DefaultEnvironment(ctx context.Context, orgID string) (string, error) {
	var name string
	err := s.db.QueryRowContext(ctx, `SELECT environment FROM org_defaults WHERE org_id = ?`, orgID).Scan(&name)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return name, err
}

// SetEnvironmentIsolation sets a custom image environment's isolation.
func (s *sqlStore) SetEnvironmentIsolation(ctx context.Context, orgID, name, isolation string, at time.Time) (Environment, error) {
	if !validIsolation(isolation) {
		return Environment{}, fmt.Errorf("set isolation: %w: isolation %q", ErrInvalid, isolation)
	}
	if err := needTime("update time", at); err != nil {
		return Environment{}, fmt.Errorf("set isolation: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE environments SET isolation = ?, updated_at = ? WHERE org_id = ? AND name = ?`,
		isolation, micros(at), orgID, name)
	if err != nil {
		return Environment{}, fmt.Errorf("set isolation: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return Environment{}, fmt.Errorf("set isolation: environment %s: %w", name, ErrNotFound)
	}
	return s.Environment(ctx, orgID, name)
}

// BuiltinIsolation returns the isolation of the org's built-in
// environment, "runc" when none was set.
func (s *sqlStore) BuiltinIsolation(ctx context.Context, orgID string) (string, error) {
	var iso string
	err := s.db.QueryRowContext(ctx, `SELECT isolation FROM org_builtin WHERE org_id = ?`, orgID).Scan(&iso)
	if err == sql.ErrNoRows {
		return "runc", nil
	}
	return iso, err
}

// SetBuiltinIsolation sets the isolation of the org's built-in environment.
func (s *sqlStore) SetBuiltinIsolation(ctx context.Context, orgID, isolation string) error {
	if !validIsolation(isolation) {
		return fmt.Errorf("set builtin isolation: %w: isolation %q", ErrInvalid, isolation)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO org_builtin (org_id, isolation) VALUES (?, ?)
		ON CONFLICT (org_id) DO UPDATE SET isolation = excluded.isolation`, orgID, isolation)
	if s.d.isForeignKey(err) {
		return fmt.Errorf("set builtin isolation: org %s: %w", orgID, ErrNotFound)
	}
	return err
}
