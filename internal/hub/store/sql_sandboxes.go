package store

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

const sandboxColumns = `id, org_id, environment, conversation, warm, image, container_id, hub, created_at, last_used_at, expires_at, token_id, holds_secrets, state, state_at, state_reason, workspace_bytes, workspace_at, archive_id`

func scanSandbox(r scanner) (Sandbox, error) {
	var (
		sb            Sandbox
		warm          int
		created, used int64
		expires       int64
		secrets       int
		stateAt       int64
		wsAt          int64
	)
	err := r.Scan(&sb.ID, &sb.OrgID, &sb.Environment, &sb.Conversation, &warm, &sb.Image, &sb.ContainerID, &sb.Hub, &created, &used, &expires, &sb.Token, &secrets,
		&sb.State, &stateAt, &sb.StateReason, &sb.WorkspaceBytes, &wsAt, &sb.ArchiveID)
	if err != nil {
		return Sandbox{}, notFound(err)
	}
	sb.Warm = warm == 1
	sb.HoldsSecrets = secrets == 1
	sb.CreatedAt, sb.LastUsedAt = fromMicros(created), fromMicros(used)
	if expires != 0 {
		sb.ExpiresAt = fromMicros(expires)
	}
	if stateAt != 0 {
		sb.StateAt = fromMicros(stateAt)
	}
	if wsAt != 0 {
		sb.WorkspaceAt = fromMicros(wsAt)
	}
	return sb, nil
}

// CreateSandbox stores a new sandbox.
func (s *sqlStore) CreateSandbox(ctx context.Context, sb Sandbox) (Sandbox, error) {
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
	sb.State, sb.StateAt, sb.StateReason = SandboxRunning, time.Time{}, ""
	sb.WorkspaceBytes, sb.WorkspaceAt, sb.ArchiveID = -1, time.Time{}, ""
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.OrgID, sb.Environment, sb.Conversation, warm, sb.Image, sb.ContainerID, sb.Hub, micros(sb.CreatedAt), micros(sb.LastUsedAt), expires,
		sb.Token, boolInt(sb.HoldsSecrets), sb.State, 0, "", -1, 0, "")
	switch {
	case s.d.isUnique(err):
		return Sandbox{}, fmt.Errorf("create sandbox: %w: conversation %q has a sandbox in %s already", ErrConflict, sb.Conversation, sb.Environment)
	case s.d.isForeignKey(err):
		return Sandbox{}, fmt.Errorf("create sandbox: org %s: %w", sb.OrgID, ErrNotFound)
	case err != nil:
		return Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	return sb, nil
}

// Sandbox returns one sandbox.
func (s *sqlStore) Sandbox(ctx context.Context, id string) (Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return sb, nil
}

// ConversationSandbox returns the conversation's sandbox in env.
func (s *sqlStore) ConversationSandbox(ctx context.Context, orgID, env, conversation string) (Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes
		WHERE org_id = ? AND environment = ? AND conversation = ? AND warm = 0`, orgID, env, conversation))
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox of conversation %q in %s: %w", conversation, env, err)
	}
	return sb, nil
}

// ListSandboxes returns the org's sandboxes, or every org's.
func (s *sqlStore) ListSandboxes(ctx context.Context, orgID string) ([]Sandbox, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE ? = '' OR org_id = ? ORDER BY created_at, id`, orgID, orgID)
	sbs, err := collect(rows, err, scanSandbox)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return sbs, nil
}

// ClaimWarmSandbox hands the oldest warm sandbox of env that hub drives to
// a conversation.
func (s *sqlStore) ClaimWarmSandbox(ctx context.Context, orgID, env, hub, conversation string, at time.Time) (Sandbox, error) {
	var out Sandbox
	err := s.tx(ctx, func(tx *sqlTx) error {
		sb, err := scanSandbox(tx.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes
			WHERE org_id = ? AND environment = ? AND hub = ? AND warm = 1 AND container_id <> '' ORDER BY created_at, id LIMIT 1`, orgID, env, hub))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET warm = 0, conversation = ?, last_used_at = ? WHERE id = ?`, conversation, micros(at), sb.ID)
		if s.d.isUnique(err) {
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
func (s *sqlStore) SetSandboxContainer(ctx context.Context, id, containerID string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET container_id = ? WHERE id = ?`, containerID, id)
	if err := checkAffected(res, err); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// SetSandboxToken records the API token a claimed warm sandbox now
// counts against.
func (s *sqlStore) SetSandboxToken(ctx context.Context, id, token string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET token_id = ? WHERE id = ?`, token, id)
	if err := checkAffected(res, err); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// TouchSandbox records the sandbox's last use (never moving it back).
func (s *sqlStore) TouchSandbox(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET last_used_at = ? WHERE id = ? AND last_used_at < ?`, micros(at), id, micros(at))
	return err
}

// DeleteSandbox deletes the sandbox's row.
func (s *sqlStore) DeleteSandbox(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
	return err
}

// SetSandboxState records the sandbox's state.
func (s *sqlStore) SetSandboxState(ctx context.Context, id, state string, at time.Time, reason string) error {
	if !slices.Contains(SandboxStates, state) {
		return fmt.Errorf("sandbox %s: %w: state %q, want one of %s", id, ErrInvalid, state, strings.Join(SandboxStates, ", "))
	}
	if err := needTime("state time", at); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET state = ?, state_at = ?, state_reason = ? WHERE id = ?`, state, micros(at), reason, id)
	if err := checkAffected(res, err); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// ArchiveSandbox records that a stopped sandbox is archived.
func (s *sqlStore) ArchiveSandbox(ctx context.Context, id, archiveID string, at time.Time, reason string) error {
	if archiveID == "" {
		return fmt.Errorf("sandbox %s: %w: no archive id", id, ErrInvalid)
	}
	if err := needTime("state time", at); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET state = ?, state_at = ?, state_reason = ?, archive_id = ?, container_id = ''
		WHERE id = ? AND state = ?`, SandboxArchived, micros(at), reason, archiveID, id, SandboxStopped)
	return s.changedState(ctx, id, res, err)
}

// UnarchiveSandbox records that an archived sandbox runs again.
func (s *sqlStore) UnarchiveSandbox(ctx context.Context, id, containerID, image string, at time.Time) error {
	if containerID == "" || image == "" {
		return fmt.Errorf("sandbox %s: %w: no container or no image", id, ErrInvalid)
	}
	if err := needTime("state time", at); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET state = ?, state_at = ?, state_reason = '', archive_id = '', container_id = ?, image = ?
		WHERE id = ? AND state = ?`, SandboxRunning, micros(at), containerID, image, id, SandboxArchived)
	return s.changedState(ctx, id, res, err)
}

// ClaimArchivedSandbox makes an archived sandbox this hub's to restore,
// with a new machine key.
func (s *sqlStore) ClaimArchivedSandbox(ctx context.Context, id, fromHub, toHub string, pub ed25519.PublicKey) error {
	if toHub == "" || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("sandbox %s: %w: a hub and an ed25519 key are required", id, ErrInvalid)
	}
	return s.tx(ctx, func(tx *sqlTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET hub = ? WHERE id = ? AND state = ? AND hub = ?`, toHub, id, SandboxArchived, fromHub)
		if err != nil {
			return fmt.Errorf("sandbox %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("sandbox %s: not archived on hub %s any more: %w", id, fromHub, ErrConflict)
		}
		res, err = tx.ExecContext(ctx, `UPDATE machines SET public_key = ? WHERE id = ? AND revoked_at IS NULL`, []byte(pub), id)
		if err := checkAffected(res, err); err != nil {
			return fmt.Errorf("machine %s: %w", id, err)
		}
		return nil
	})
}

// changedState tells a conditional state change that matched no row
// apart: ErrNotFound (no such sandbox) or ErrConflict (not in the state).
func (s *sqlStore) changedState(ctx context.Context, id string, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	sb, err := s.Sandbox(ctx, id)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return fmt.Errorf("sandbox %s is %s: %w", id, sb.State, ErrConflict)
}

// SetSandboxWorkspace records what the sandbox's /workspace held at `at`.
func (s *sqlStore) SetSandboxWorkspace(ctx context.Context, id string, bytes int64, at time.Time) error {
	if bytes < 0 {
		return fmt.Errorf("sandbox %s: %w: a negative workspace size", id, ErrInvalid)
	}
	if err := needTime("measure time", at); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET workspace_bytes = ?, workspace_at = ? WHERE id = ?`, bytes, micros(at), id)
	if err := checkAffected(res, err); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// SetSandboxPolicy stores an environment's lifecycle policy.
func (s *sqlStore) SetSandboxPolicy(ctx context.Context, orgID, env string, p Policy) error {
	if env == "" {
		return fmt.Errorf("set sandbox policy: %w: no environment", ErrInvalid)
	}
	for _, d := range []time.Duration{p.PauseAfter, p.StopAfter, p.ArchiveAfter, p.DeleteAfter} {
		if d < Never {
			return fmt.Errorf("set sandbox policy of %s: %w: a negative duration", env, ErrInvalid)
		}
	}
	if p == (Policy{}) {
		_, err := s.db.ExecContext(ctx, `DELETE FROM sandbox_policies WHERE org_id = ? AND environment = ?`, orgID, env)
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_policies (org_id, environment, pause_after_ms, stop_after_ms, archive_after_ms, delete_after_ms)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (org_id, environment) DO UPDATE SET pause_after_ms = excluded.pause_after_ms,
		stop_after_ms = excluded.stop_after_ms, archive_after_ms = excluded.archive_after_ms, delete_after_ms = excluded.delete_after_ms`,
		orgID, env, policyMillis(p.PauseAfter), policyMillis(p.StopAfter), policyMillis(p.ArchiveAfter), policyMillis(p.DeleteAfter))
	if s.d.isForeignKey(err) {
		return fmt.Errorf("set sandbox policy: org %s: %w", orgID, ErrNotFound)
	}
	return err
}

// SandboxPolicy returns an environment's lifecycle policy.
func (s *sqlStore) SandboxPolicy(ctx context.Context, orgID, env string) (Policy, error) {
	var pause, stop, arch, del int64
	err := s.db.QueryRowContext(ctx, `SELECT pause_after_ms, stop_after_ms, archive_after_ms, delete_after_ms FROM sandbox_policies
		WHERE org_id = ? AND environment = ?`, orgID, env).Scan(&pause, &stop, &arch, &del)
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, nil
	}
	if err != nil {
		return Policy{}, fmt.Errorf("sandbox policy of %s: %w", env, err)
	}
	return Policy{PauseAfter: policyDuration(pause), StopAfter: policyDuration(stop), ArchiveAfter: policyDuration(arch), DeleteAfter: policyDuration(del)}, nil
}

// policyMillis is a Policy duration as stored: milliseconds, -1 never.
func policyMillis(d time.Duration) int64 {
	if d == Never {
		return -1
	}
	return d.Milliseconds()
}

func policyDuration(ms int64) time.Duration {
	if ms < 0 {
		return Never
	}
	return time.Duration(ms) * time.Millisecond
}
