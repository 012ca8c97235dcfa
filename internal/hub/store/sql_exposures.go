package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Exposures stores the ports exposed through the hub's preview server.
// An exposure is live until it is revoked or its expiry passes; the URL's
// token is stored as its SHA-256 only (HashToken), so a URL is shown once.
type Exposures interface {
	// CreateExposure stores e and assigns its ID ("px-…"). ErrConflict if
	// the token hash is stored already; ErrNotFound if the org or the
	// machine is unknown; ErrInvalid for a bad port or access.
	CreateExposure(ctx context.Context, e Exposure) (Exposure, error)
	// ExposureByToken returns the exposure whose token hashes to hash,
	// live at now; ErrNotFound otherwise (unknown, revoked or expired).
	ExposureByToken(ctx context.Context, hash TokenHash, now time.Time) (Exposure, error)
	// ListExposures returns the org's exposures live at now, of one
	// machine ("" for all), oldest first.
	ListExposures(ctx context.Context, orgID, machineID string, now time.Time) ([]Exposure, error)
	// RevokeExposure revokes one of the org's live exposures at `at`;
	// ErrNotFound if there is no such live one.
	RevokeExposure(ctx context.Context, orgID, id string, at time.Time) error
}

// Access levels of an exposure.
const (
	AccessPrivate = "private" // the user who exposed it
	AccessOrg     = "org"     // any member of the org
	AccessPublic  = "public"  // anyone with the URL
)

// Exposure is a port of a machine or sandbox served by the preview server.
type Exposure struct {
	ID        string
	OrgID     string
	MachineID string // the machine or sandbox ("sb-…")
	Port      int
	Access    string    // AccessPrivate, AccessOrg or AccessPublic
	TokenHash TokenHash // SHA-256 of the URL's token
	// CreatedBy is the ID of the API token that exposed it (private
	// access admits that token's holder), CreatedName its name.
	CreatedBy, CreatedName string
	CreatedAt              time.Time
	ExpiresAt              time.Time // zero: until unexposed
	RevokedAt              time.Time // zero: not revoked
}

const exposureColumns = `id, org_id, machine_id, port, access, token_sha256, created_by, created_name, created_at, expires_at, revoked_at`

func scanExposure(r scanner) (Exposure, error) {
	var (
		e                Exposure
		hash             []byte
		created          int64
		expires, revoked sql.NullInt64
	)
	if err := r.Scan(&e.ID, &e.OrgID, &e.MachineID, &e.Port, &e.Access, &hash, &e.CreatedBy, &e.CreatedName, &created, &expires, &revoked); err != nil {
		return Exposure{}, err
	}
	copy(e.TokenHash[:], hash)
	e.CreatedAt, e.ExpiresAt, e.RevokedAt = fromMicros(created), fromNullMicros(expires), fromNullMicros(revoked)
	return e, nil
}

func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micros(t)
}

var _ Exposures = (*sqlStore)(nil)

// CreateExposure stores an exposure.
func (s *sqlStore) CreateExposure(ctx context.Context, e Exposure) (Exposure, error) {
	switch {
	case e.Port < 1 || e.Port > 65535:
		return Exposure{}, fmt.Errorf("create exposure: %w: port %d", ErrInvalid, e.Port)
	case e.Access != AccessPrivate && e.Access != AccessOrg && e.Access != AccessPublic:
		return Exposure{}, fmt.Errorf("create exposure: %w: access %q", ErrInvalid, e.Access)
	case e.TokenHash == TokenHash{}:
		return Exposure{}, fmt.Errorf("create exposure: %w: no token hash", ErrInvalid)
	case !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(e.CreatedAt):
		return Exposure{}, fmt.Errorf("create exposure: %w: expiry is not after creation", ErrInvalid)
	}
	if err := needTime("creation time", e.CreatedAt); err != nil {
		return Exposure{}, fmt.Errorf("create exposure: %w", err)
	}
	e.ID = NewID("px-")
	_, err := s.db.ExecContext(ctx, `INSERT INTO exposures (`+exposureColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`,
		e.ID, e.OrgID, e.MachineID, e.Port, e.Access, e.TokenHash[:], e.CreatedBy, e.CreatedName, micros(e.CreatedAt), nullMicros(e.ExpiresAt))
	switch {
	case s.d.isUnique(err):
		return Exposure{}, fmt.Errorf("create exposure: token stored already: %w", ErrConflict)
	case s.d.isForeignKey(err):
		return Exposure{}, fmt.Errorf("create exposure: org %s or machine %s: %w", e.OrgID, e.MachineID, ErrNotFound)
	case err != nil:
		return Exposure{}, fmt.Errorf("create exposure: %w", err)
	}
	e.CreatedAt, e.ExpiresAt = fromMicros(micros(e.CreatedAt)), fromNullMicros(sql.NullInt64{Int64: micros(e.ExpiresAt), Valid: !e.ExpiresAt.IsZero()})
	return e, nil
}

// ExposureByToken returns a live exposure by its token's hash.
func (s *sqlStore) ExposureByToken(ctx context.Context, hash TokenHash, now time.Time) (Exposure, error) {
	e, err := scanExposure(s.db.QueryRowContext(ctx, `SELECT `+exposureColumns+` FROM exposures
		WHERE token_sha256 = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`, hash[:], micros(now)))
	if err != nil {
		return Exposure{}, fmt.Errorf("exposure: %w", notFound(err))
	}
	return e, nil
}

// ListExposures lists the org's live exposures.
func (s *sqlStore) ListExposures(ctx context.Context, orgID, machineID string, now time.Time) ([]Exposure, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+exposureColumns+` FROM exposures
		WHERE org_id = ? AND (? = '' OR machine_id = ?) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
		ORDER BY created_at, id`, orgID, machineID, machineID, micros(now))
	es, err := collect(rows, err, scanExposure)
	if err != nil {
		return nil, fmt.Errorf("list exposures: %w", err)
	}
	return es, nil
}

// RevokeExposure revokes a live exposure.
func (s *sqlStore) RevokeExposure(ctx context.Context, orgID, id string, at time.Time) error {
	if err := needTime("revocation time", at); err != nil {
		return fmt.Errorf("revoke exposure: %w", err)
	}
	err := checkAffected(s.db.ExecContext(ctx, `UPDATE exposures SET revoked_at = ?
		WHERE org_id = ? AND id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`, micros(at), orgID, id, micros(at)))
	if err != nil {
		return fmt.Errorf("revoke exposure %s: %w", id, err)
	}
	return nil
}
