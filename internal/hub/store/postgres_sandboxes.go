package store

import (
	"context"
	"fmt"
	"time"
)

// CreateSandbox stores a new sandbox.
func (s *Postgres) CreateSandbox(ctx context.Context, sb Sandbox) (Sandbox, error) {
	switch {
	case sb.ID == "" || sb.OrgID == "" || sb.Environment == "" || sb.Image == "":
		return Sandbox{}, fmt.Errorf("create sandbox: %w: id, org, environment and image are required", ErrInvalid)
	case sb.Warm && sb.Conversation != "":
		return Sandbox{}, fmt.Errorf("create sandbox: %w: a warm sandbox has no conversation", ErrInvalid)
	}
	if err := needTime("creation time", sb.CreatedAt); err != nil {
		return Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	sb.CreatedAt = fromMicros(micros(sb.CreatedAt))
	sb.LastUsedAt = sb.CreatedAt
	var expires int64
	if !sb.ExpiresAt.IsZero() {
		if sb.Warm || !sb.ExpiresAt.After(sb.CreatedAt) {
			return Sandbox{}, fmt.Errorf("create sandbox: %w: an end must come after the creation, and a warm sandbox has none", ErrInvalid)
		}
		expires = micros(sb.ExpiresAt)
		sb.ExpiresAt = fromMicros(expires)
	}
	warm := 0
	if sb.Warm {
		warm = 1
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.OrgID, sb.Environment, sb.Conversation, warm, sb.Image, sb.ContainerID, sb.Hub, micros(sb.CreatedAt), micros(sb.LastUsedAt), expires)
	switch {
	case pgUnique(err):
		return Sandbox{}, fmt.Errorf("create sandbox: %w: conversation %q has a sandbox in %s already", ErrConflict, sb.Conversation, sb.Environment)
	case pgForeignKey(err):
		return Sandbox{}, fmt.Errorf("create sandbox: org %s: %w", sb.OrgID, ErrNotFound)
	case err != nil:
		return Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	return sb, nil
}

// Sandbox returns one sandbox.
func (s *Postgres) Sandbox(ctx context.Context, id string) (Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return sb, nil
}

// ConversationSandbox returns the conversation's sandbox in env.
func (s *Postgres) ConversationSandbox(ctx context.Context, orgID, env, conversation string) (Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes
		WHERE org_id = ? AND environment = ? AND conversation = ? AND warm = 0`, orgID, env, conversation))
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox of conversation %q in %s: %w", conversation, env, err)
	}
	return sb, nil
}

// ListSandboxes returns the org's sandboxes, or every org's.
func (s *Postgres) ListSandboxes(ctx context.Context, orgID string) ([]Sandbox, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE ? = '' OR org_id = ? ORDER BY created_at, id`, orgID, orgID)
	sbs, err := collect(rows, err, scanSandbox)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return sbs, nil
}

// ClaimWarmSandbox hands the oldest warm sandbox of env to a conversation.
func (s *Postgres) ClaimWarmSandbox(ctx context.Context, orgID, env, conversation string, at time.Time) (Sandbox, error) {
	var out Sandbox
	err := s.tx(ctx, func(tx *pgTx) error {
		sb, err := scanSandbox(tx.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes
			WHERE org_id = ? AND environment = ? AND warm = 1 AND container_id <> '' ORDER BY created_at, id LIMIT 1`, orgID, env))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET warm = 0, conversation = ?, last_used_at = ? WHERE id = ?`, conversation, micros(at), sb.ID)
		if pgUnique(err) {
			return fmt.Errorf("%w: conversation %q has a sandbox in %s already", ErrConflict, conversation, env)
		}
		sb.Warm, sb.Conversation, sb.LastUsedAt = false, conversation, fromMicros(micros(at))
		out = sb
		return err
	})
	if err != nil {
		return Sandbox{}, fmt.Errorf("claim a warm sandbox of %s: %w", env, err)
	}
	return out, nil
}

// SetSandboxContainer records the sandbox's container.
func (s *Postgres) SetSandboxContainer(ctx context.Context, id, containerID string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET container_id = ? WHERE id = ?`, containerID, id)
	if err := checkAffected(res, err); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// TouchSandbox records the sandbox's last use (never moving it back).
func (s *Postgres) TouchSandbox(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET last_used_at = GREATEST(last_used_at, ?) WHERE id = ?`, micros(at), id)
	return err
}

// DeleteSandbox deletes the sandbox's row.
func (s *Postgres) DeleteSandbox(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
	return err
}
