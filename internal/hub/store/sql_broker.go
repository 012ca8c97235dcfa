package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Broker stores what brokered secrets need: each org's CA (certificate and
// key, PEM) and the private destinations environments may reach.
type Broker interface {
	// OrgCA returns the org's CA; ErrNotFound if it has none yet.
	OrgCA(ctx context.Context, orgID string) (certPEM, keyPEM []byte, err error)
	// PutOrgCA stores the org's CA unless it has one, and returns the one
	// stored (another replica's, if it was first).
	PutOrgCA(ctx context.Context, orgID string, certPEM, keyPEM []byte, at time.Time) ([]byte, []byte, error)
	// EnvironmentAllowPrivate returns the private destinations (CIDR or
	// host) an environment's sandboxes may reach; ErrNotFound for no such
	// environment.
	EnvironmentAllowPrivate(ctx context.Context, orgID, name string) ([]string, error)
	// SetEnvironmentAllowPrivate replaces that list (nil: none).
	SetEnvironmentAllowPrivate(ctx context.Context, orgID, name string, list []string, at time.Time) error
}

var _ Broker = (*sqlStore)(nil)

// OrgCA returns the org's CA.
func (s *sqlStore) OrgCA(ctx context.Context, orgID string) ([]byte, []byte, error) {
	var c, k string
	err := s.db.QueryRowContext(ctx, `SELECT cert_pem, key_pem FROM org_cas WHERE org_id = ?`, orgID).Scan(&c, &k)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("org CA of %s: %w", orgID, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("org CA: %w", err)
	}
	return []byte(c), []byte(k), nil
}

// PutOrgCA stores the org's CA unless it has one.
func (s *sqlStore) PutOrgCA(ctx context.Context, orgID string, certPEM, keyPEM []byte, at time.Time) ([]byte, []byte, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, nil, fmt.Errorf("put org CA: %w: empty certificate or key", ErrInvalid)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO org_cas (org_id, cert_pem, key_pem, created_at) VALUES (?, ?, ?, ?)`,
		orgID, string(certPEM), string(keyPEM), micros(at))
	if err != nil && !s.d.isUnique(err) {
		return nil, nil, fmt.Errorf("put org CA: %w", err)
	}
	return s.OrgCA(ctx, orgID)
}

// EnvironmentAllowPrivate returns an environment's private destinations.
func (s *sqlStore) EnvironmentAllowPrivate(ctx context.Context, orgID, name string) ([]string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT allow_private FROM environments WHERE org_id = ? AND name = ?`, orgID, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("environment %s: %w", name, ErrNotFound)
	}
	if err != nil || v == "" {
		return nil, err
	}
	return strings.Split(v, ","), nil
}

// SetEnvironmentAllowPrivate replaces an environment's private
// destinations.
func (s *sqlStore) SetEnvironmentAllowPrivate(ctx context.Context, orgID, name string, list []string, at time.Time) error {
	for _, e := range list {
		if e == "" || strings.ContainsAny(e, ", ") {
			return fmt.Errorf("set allow-private: %w: entry %q", ErrInvalid, e)
		}
	}
	res, err := s.db.ExecContext(ctx, `UPDATE environments SET allow_private = ?, updated_at = ? WHERE org_id = ? AND name = ?`,
		strings.Join(list, ","), micros(at), orgID, name)
	if err != nil {
		return fmt.Errorf("set allow-private: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("set allow-private: environment %s: %w", name, ErrNotFound)
	}
	return nil
}
