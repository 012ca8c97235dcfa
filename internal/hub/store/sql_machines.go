package store

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CreatePairingCode stores a pairing code's HMACs.
func (s *sqlStore) CreatePairingCode(ctx context.Context, c PairingCode) (PairingCode, error) {
	switch {
	case c.OrgID == "":
		return PairingCode{}, fmt.Errorf("create pairing code: %w: no org", ErrInvalid)
	case len(c.Selector) != 32 || len(c.MAC) != 32:
		return PairingCode{}, fmt.Errorf("create pairing code: %w: selector and MAC must be 32-byte HMACs", ErrInvalid)
	case c.CreatedAt.IsZero() || !c.ExpiresAt.After(c.CreatedAt):
		return PairingCode{}, fmt.Errorf("create pairing code: %w: it must expire after it is created", ErrInvalid)
	}
	c = PairingCode{
		ID:        NewID("pc-"),
		OrgID:     c.OrgID,
		Selector:  c.Selector,
		MAC:       c.MAC,
		CreatedBy: c.CreatedBy,
		CreatedAt: fromMicros(micros(c.CreatedAt)),
		ExpiresAt: fromMicros(micros(c.ExpiresAt)),
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO pairing_codes
		(id, org_id, selector, mac, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.OrgID, c.Selector, c.MAC, c.CreatedBy, micros(c.CreatedAt), micros(c.ExpiresAt))
	switch {
	case s.d.isUnique(err):
		return PairingCode{}, fmt.Errorf("create pairing code: selector taken: %w", ErrConflict)
	case s.d.isForeignKey(err):
		return PairingCode{}, fmt.Errorf("create pairing code: org %s: %w", c.OrgID, ErrNotFound)
	case err != nil:
		return PairingCode{}, fmt.Errorf("create pairing code: %w", err)
	}
	return c, nil
}

const codeColumns = `id, org_id, selector, mac, created_by, created_at, expires_at,
	used_at, used_by, used_from, failed_attempts, locked_at`

func scanCode(r scanner) (PairingCode, error) {
	var (
		c                PairingCode
		created, expires int64
		used, locked     sql.NullInt64
	)
	err := r.Scan(&c.ID, &c.OrgID, &c.Selector, &c.MAC, &c.CreatedBy, &created, &expires,
		&used, &c.UsedBy, &c.UsedFrom, &c.FailedAttempts, &locked)
	if err != nil {
		return PairingCode{}, notFound(err)
	}
	c.CreatedAt, c.ExpiresAt = fromMicros(created), fromMicros(expires)
	c.UsedAt, c.LockedAt = fromNullMicros(used), fromNullMicros(locked)
	return c, nil
}

// PairingCodeBySelector returns the code with that selector.
func (s *sqlStore) PairingCodeBySelector(ctx context.Context, selector []byte) (PairingCode, error) {
	c, err := scanCode(s.db.QueryRowContext(ctx, `SELECT `+codeColumns+` FROM pairing_codes WHERE selector = ?`, selector))
	if err != nil {
		return PairingCode{}, fmt.Errorf("pairing code: %w", err)
	}
	return c, nil
}

// ListPairingCodes returns the org's codes, oldest first.
func (s *sqlStore) ListPairingCodes(ctx context.Context, orgID string) ([]PairingCode, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT `+codeColumns+` FROM pairing_codes WHERE org_id = ? ORDER BY created_at, id`, orgID)
	cs, err := collect(rows, err, scanCode)
	if err != nil {
		return nil, fmt.Errorf("list pairing codes: %w", err)
	}
	return cs, nil
}

// liveCode is the condition for a code that can still be redeemed at the
// time bound to the last placeholder.
const liveCode = `used_at IS NULL AND locked_at IS NULL AND expires_at > ?`

// FailPairingCode counts a wrong guess against a live code.
func (s *sqlStore) FailPairingCode(ctx context.Context, id string, lockAfter int, at time.Time) (PairingCode, error) {
	if lockAfter < 1 {
		return PairingCode{}, fmt.Errorf("count pairing failure: %w: lockAfter %d", ErrInvalid, lockAfter)
	}
	c, err := scanCode(s.db.QueryRowContext(ctx, `UPDATE pairing_codes SET
			failed_attempts = failed_attempts + 1,
			locked_at = CASE WHEN failed_attempts + 1 >= ? THEN CAST(? AS BIGINT) ELSE NULL END
		WHERE id = ? AND `+liveCode+` RETURNING `+codeColumns,
		lockAfter, micros(at), id, micros(at)))
	if errors.Is(err, ErrNotFound) {
		err = whyNotLive(ctx, s.db, id)
	}
	if err != nil {
		return PairingCode{}, fmt.Errorf("count pairing failure: %w", err)
	}
	return c, nil
}

// whyNotLive tells a code that does not exist (ErrNotFound) from one that is
// no longer live (ErrPrecondition). Inside a transaction q must be the
// transaction: with one connection, a query outside it would wait forever.
func whyNotLive(ctx context.Context, q querier, id string) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM pairing_codes WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("pairing code %s: %w", id, ErrNotFound)
	}
	return fmt.Errorf("pairing code %s is used, expired or locked: %w", id, ErrPrecondition)
}

// RedeemPairingCode uses the code and creates the machine it pairs.
func (s *sqlStore) RedeemPairingCode(ctx context.Context, id, remoteAddr string, at time.Time, m Machine) (Machine, error) {
	if err := needTime("redemption time", at); err != nil {
		return Machine{}, fmt.Errorf("redeem pairing code: %w", err)
	}
	m.ID = "" // a paired machine is always m-…
	m, err := newMachine(m, at)
	if err != nil {
		return Machine{}, fmt.Errorf("redeem pairing code: %w", err)
	}
	err = s.tx(ctx, func(tx *sqlTx) error {
		err := tx.QueryRowContext(ctx, `UPDATE pairing_codes SET used_at = ?, used_by = ?, used_from = ?
			WHERE id = ? AND `+liveCode+` RETURNING org_id`,
			micros(at), m.ID, remoteAddr, id, micros(at)).Scan(&m.OrgID)
		if errors.Is(err, sql.ErrNoRows) {
			return whyNotLive(ctx, tx, id)
		}
		if err != nil {
			return err
		}
		return s.insertMachine(ctx, tx, m)
	})
	if err != nil {
		return Machine{}, fmt.Errorf("redeem pairing code: %w", err)
	}
	return m, nil
}

// DeletePairingCodes deletes codes that expired before `before`.
func (s *sqlStore) DeletePairingCodes(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM pairing_codes WHERE expires_at < ?`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("delete pairing codes: %w", err)
	}
	return res.RowsAffected()
}

// newMachine checks m and fills in what the store assigns.
func newMachine(m Machine, at time.Time) (Machine, error) {
	if len(m.PublicKey) != ed25519.PublicKeySize {
		return Machine{}, fmt.Errorf("%w: public key has %d bytes, want %d", ErrInvalid, len(m.PublicKey), ed25519.PublicKeySize)
	}
	if !strings.HasPrefix(m.ID, "sb-") || len(m.ID) > 64 {
		m.ID = NewID("m-")
	}
	m.PublicKey = append(ed25519.PublicKey(nil), m.PublicKey...)
	m.CreatedAt = fromMicros(micros(at))
	m.LastSeenAt, m.RevokedAt = time.Time{}, time.Time{}
	return m, nil
}

func (s *sqlStore) insertMachine(ctx context.Context, tx *sqlTx, m Machine) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO machines
		(id, org_id, name, hostname, os, arch, version, public_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.OrgID, m.Name, m.Hostname, m.OS, m.Arch, m.Version, []byte(m.PublicKey), micros(m.CreatedAt))
	switch {
	case s.d.isUnique(err):
		return fmt.Errorf("this public key is registered to a machine already: %w", ErrConflict)
	case s.d.isForeignKey(err):
		return fmt.Errorf("org %s: %w", m.OrgID, ErrNotFound)
	}
	return err
}

// CreateMachine registers a machine without a pairing code.
func (s *sqlStore) CreateMachine(ctx context.Context, m Machine) (Machine, error) {
	if m.OrgID == "" {
		return Machine{}, fmt.Errorf("create machine: %w: no org", ErrInvalid)
	}
	if err := needTime("creation time", m.CreatedAt); err != nil {
		return Machine{}, fmt.Errorf("create machine: %w", err)
	}
	m, err := newMachine(m, m.CreatedAt)
	if err != nil {
		return Machine{}, fmt.Errorf("create machine: %w", err)
	}
	if err := s.tx(ctx, func(tx *sqlTx) error { return s.insertMachine(ctx, tx, m) }); err != nil {
		return Machine{}, fmt.Errorf("create machine: %w", err)
	}
	return m, nil
}

const machineColumns = `id, org_id, name, hostname, os, arch, version, public_key, created_at, last_seen_at, revoked_at`

func scanMachine(r scanner) (Machine, error) {
	var (
		m              Machine
		key            []byte
		created        int64
		seen, revokedA sql.NullInt64
	)
	err := r.Scan(&m.ID, &m.OrgID, &m.Name, &m.Hostname, &m.OS, &m.Arch, &m.Version, &key, &created, &seen, &revokedA)
	if err != nil {
		return Machine{}, notFound(err)
	}
	m.PublicKey = ed25519.PublicKey(key)
	m.CreatedAt = fromMicros(created)
	m.LastSeenAt, m.RevokedAt = fromNullMicros(seen), fromNullMicros(revokedA)
	return m, nil
}

// Machine returns the machine with that ID.
func (s *sqlStore) Machine(ctx context.Context, id string) (Machine, error) {
	m, err := scanMachine(s.queryRow(ctx, `SELECT `+machineColumns+` FROM machines WHERE id = ?`, id))
	if err != nil {
		return Machine{}, fmt.Errorf("machine %s: %w", id, err)
	}
	return m, nil
}

// ListMachines returns the org's machines, oldest first.
func (s *sqlStore) ListMachines(ctx context.Context, orgID string) ([]Machine, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT `+machineColumns+` FROM machines WHERE org_id = ? ORDER BY created_at, id`, orgID)
	ms, err := collect(rows, err, scanMachine)
	if err != nil {
		return nil, fmt.Errorf("list machines: %w", err)
	}
	return ms, nil
}

// MachineSeen records the machine's last sign of life; it never moves back.
func (s *sqlStore) MachineSeen(ctx context.Context, id string, at time.Time, version string) error {
	err := checkAffected(s.db.ExecContext(ctx, `UPDATE machines SET
			last_seen_at = CASE WHEN last_seen_at IS NULL OR last_seen_at < ? THEN ? ELSE last_seen_at END,
			version = CASE WHEN ? = '' THEN version ELSE ? END
		WHERE id = ?`, micros(at), micros(at), version, version, id))
	if err != nil {
		return fmt.Errorf("machine %s seen: %w", id, err)
	}
	return nil
}

// RevokeMachine revokes one of the org's machines.
func (s *sqlStore) RevokeMachine(ctx context.Context, orgID, id string, at time.Time) error {
	if err := needTime("revocation time", at); err != nil {
		return fmt.Errorf("revoke machine: %w", err)
	}
	err := checkAffected(s.db.ExecContext(ctx,
		`UPDATE machines SET revoked_at = COALESCE(revoked_at, ?) WHERE org_id = ? AND id = ?`, micros(at), orgID, id))
	if err != nil {
		return fmt.Errorf("revoke machine %s: %w", id, err)
	}
	return nil
}
