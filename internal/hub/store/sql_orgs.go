package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CreateOrg creates an org.
func (s *sqlStore) CreateOrg(ctx context.Context, name string, at time.Time) (Org, error) {
	if name == "" {
		return Org{}, fmt.Errorf("create org: %w: empty name", ErrInvalid)
	}
	if err := needTime("creation time", at); err != nil {
		return Org{}, fmt.Errorf("create org: %w", err)
	}
	o := Org{ID: NewID("org-"), Name: name, CreatedAt: fromMicros(micros(at))}
	_, err := s.db.ExecContext(ctx, `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?)`,
		o.ID, o.Name, micros(at))
	if s.d.isUnique(err) {
		return Org{}, fmt.Errorf("create org: an org named %q exists: %w", name, ErrConflict)
	}
	if err != nil {
		return Org{}, fmt.Errorf("create org: %w", err)
	}
	return o, nil
}

const orgColumns = `id, name, created_at`

func scanOrg(r scanner) (Org, error) {
	var o Org
	var created int64
	if err := r.Scan(&o.ID, &o.Name, &created); err != nil {
		return Org{}, notFound(err)
	}
	o.CreatedAt = fromMicros(created)
	return o, nil
}

// Org returns the org with that ID.
func (s *sqlStore) Org(ctx context.Context, id string) (Org, error) {
	o, err := scanOrg(s.queryRow(ctx, `SELECT `+orgColumns+` FROM orgs WHERE id = ?`, id))
	if err != nil {
		return Org{}, fmt.Errorf("org %s: %w", id, err)
	}
	return o, nil
}

// OrgByName returns the org with that name.
func (s *sqlStore) OrgByName(ctx context.Context, name string) (Org, error) {
	o, err := scanOrg(s.db.QueryRowContext(ctx, `SELECT `+orgColumns+` FROM orgs WHERE name = ?`, name))
	if err != nil {
		return Org{}, fmt.Errorf("org %q: %w", name, err)
	}
	return o, nil
}

// ListOrgs returns every org, oldest first.
func (s *sqlStore) ListOrgs(ctx context.Context) ([]Org, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+orgColumns+` FROM orgs ORDER BY created_at, id`)
	orgs, err := collect(rows, err, scanOrg)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	return orgs, nil
}

// CreateToken stores an API token's hash.
func (s *sqlStore) CreateToken(ctx context.Context, t Token) (Token, error) {
	switch {
	case t.OrgID == "":
		return Token{}, fmt.Errorf("create token: %w: no org", ErrInvalid)
	case t.Name == "":
		return Token{}, fmt.Errorf("create token: %w: empty name", ErrInvalid)
	case !t.Role.Valid():
		return Token{}, fmt.Errorf("create token: %w: role %q (want admin or member)", ErrInvalid, t.Role)
	case t.Hash == TokenHash{}:
		return Token{}, fmt.Errorf("create token: %w: no hash", ErrInvalid)
	case t.Owner && t.Role != RoleAdmin:
		return Token{}, fmt.Errorf("create token: %w: an owner token is an admin token", ErrInvalid)
	}
	if err := needTime("creation time", t.CreatedAt); err != nil {
		return Token{}, fmt.Errorf("create token: %w", err)
	}
	t.ID = NewID("tok-")
	t.CreatedAt = fromMicros(micros(t.CreatedAt))
	t.LastUsedAt, t.RevokedAt = time.Time{}, time.Time{}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO api_tokens (id, org_id, name, role, owner, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.OrgID, t.Name, string(t.Role), boolInt(t.Owner), t.Hash[:], micros(t.CreatedAt))
	switch {
	case s.d.isUnique(err):
		return Token{}, fmt.Errorf("create token: the org has a live token named %q: %w", t.Name, ErrConflict)
	case s.d.isForeignKey(err):
		return Token{}, fmt.Errorf("create token: org %s: %w", t.OrgID, ErrNotFound)
	case err != nil:
		return Token{}, fmt.Errorf("create token: %w", err)
	}
	return t, nil
}

const tokenColumns = `id, org_id, name, role, owner, sha256, created_at, last_used_at, revoked_at`

func scanToken(r scanner) (Token, error) {
	var (
		t                Token
		role             string
		owner            int
		hash             []byte
		created          int64
		lastUsed, revoke sql.NullInt64
	)
	if err := r.Scan(&t.ID, &t.OrgID, &t.Name, &role, &owner, &hash, &created, &lastUsed, &revoke); err != nil {
		return Token{}, notFound(err)
	}
	t.Role = Role(role)
	t.Owner = owner == 1
	copy(t.Hash[:], hash)
	t.CreatedAt = fromMicros(created)
	t.LastUsedAt, t.RevokedAt = fromNullMicros(lastUsed), fromNullMicros(revoke)
	return t, nil
}

// TokenByHash returns the live token with that hash.
func (s *sqlStore) TokenByHash(ctx context.Context, hash TokenHash) (Token, error) {
	t, err := scanToken(s.queryRow(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE sha256 = ?`, hash[:]))
	if err != nil {
		return Token{}, fmt.Errorf("API token: %w", err)
	}
	if !t.RevokedAt.IsZero() {
		return Token{}, fmt.Errorf("API token %q was revoked at %s: %w", t.Name, t.RevokedAt.Format(time.RFC3339), ErrRevoked)
	}
	return t, nil
}

// ListTokens returns the org's tokens, oldest first.
func (s *sqlStore) ListTokens(ctx context.Context, orgID string) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE org_id = ? ORDER BY created_at, id`, orgID)
	ts, err := collect(rows, err, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return ts, nil
}

// TouchToken records the token's last use.
func (s *sqlStore) TouchToken(ctx context.Context, id string, at time.Time) error {
	err := checkAffected(s.db.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, micros(at), id))
	if err != nil {
		return fmt.Errorf("touch token %s: %w", id, err)
	}
	return nil
}

// RevokeToken revokes one of the org's tokens.
func (s *sqlStore) RevokeToken(ctx context.Context, orgID, id string, at time.Time) error {
	if err := needTime("revocation time", at); err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	err := checkAffected(s.db.ExecContext(ctx,
		`UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE org_id = ? AND id = ?`, micros(at), orgID, id))
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	return nil
}
