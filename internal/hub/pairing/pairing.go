// Package pairing turns a pairing code into a registered machine: an admin
// creates a short-lived code for an org, the machine's owner types it into
// `agentd pair`, and the daemon sends it to the hub with the public half of
// the Ed25519 key it generated. The hub's POST /v1/pair handler calls
// Service.Redeem.
//
// # Codes
//
// A code is XXXX-XXXX: 8 characters from a 31-letter alphabet without
// 0/O, 1/I/L (about 39.6 bits), drawn with crypto/rand. Input is
// normalised: upper-cased, spaces and dashes dropped. A code is never
// stored or logged in clear: the store keeps two HMAC-SHA256s keyed with the
// hub's server secret, one of the first half (the selector) and one of the
// whole code (the MAC). A stolen database without the secret reveals
// nothing; with the secret, live codes could be brute-forced offline, but
// they expire within minutes and are single use.
//
// # Wrong guesses, lockout and rate limit
//
// A wrong code does not say which code it was meant for, so the scheme splits
// each code in two, like a split token: the first half names a code, the
// second half proves it.
//
//   - The selector of the guess's first half finds at most one code (it is
//     unique across the hub; creation draws again on a collision).
//   - If it names a live code and the whole guess does not match its MAC
//     (compared in constant time), the wrong guess counts against that
//     code; the fifth locks it for good and the admin makes a new one.
//     Someone who saw half a code over a shoulder has 5 tries at the other
//     half (1 in 923,521 each), not unlimited ones.
//   - A guess whose first half names no code cannot be pinned on any
//     code. It is held back by the per-address limit instead: a token
//     bucket of 10 attempts a minute per IPv4 address or IPv6 /64, in
//     memory. A blind guess hits a given live code with probability 1 in
//     31^8 (about 10^-12), so even many addresses get nowhere.
//   - Every attempt that does not pair a machine spends a token; one that
//     succeeds gets its token back, so pairing a fleet from behind one NAT
//     is not throttled.
//
// Locking all of an org's codes after N wrong tries from anywhere was
// rejected: a guess carries no org, so it would have to be all codes of all
// orgs, and anyone on the internet could keep every admin from pairing.
//
// All wrong guesses get the same answer, whether the first half named a code
// or not and whether the guess locked it, so answers do not reveal which
// halves exist. Expired, used and locked are told apart only for the whole,
// correct code — then the person holding it learns what to do.
//
// Redeeming is one store transaction (mark the code used, create the
// machine): of concurrent redemptions of one code exactly one wins. A retry
// with the same code and the same public key after a lost response gets the
// same machine back instead of "already used".
package pairing

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// Store is what pairing needs from the hub's store.
type Store interface {
	ServerSecret(ctx context.Context) ([]byte, error)
	Org(ctx context.Context, id string) (store.Org, error)
	Machine(ctx context.Context, id string) (store.Machine, error)
	CreatePairingCode(ctx context.Context, c store.PairingCode) (store.PairingCode, error)
	PairingCodeBySelector(ctx context.Context, selector []byte) (store.PairingCode, error)
	FailPairingCode(ctx context.Context, id string, lockAfter int, at time.Time) (store.PairingCode, error)
	RedeemPairingCode(ctx context.Context, id, remoteAddr string, at time.Time, m store.Machine) (store.Machine, error)
	DeletePairingCodes(ctx context.Context, before time.Time) (int64, error)
	TakeToken(ctx context.Context, key string, every time.Duration, burst int, at time.Time) (bool, time.Duration, error)
	ReturnToken(ctx context.Context, key string, every time.Duration) error
	DeleteRateLimits(ctx context.Context, at time.Time) (int64, error)
}

var _ Store = store.Store(nil)

// Options configures a Service. Zero fields get defaults.
type Options struct {
	// Store holds the codes and machines. Required.
	Store Store
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DefaultTTL is how long a code lives when CreateCode is given 0
	// (default 15 minutes).
	DefaultTTL time.Duration
	// MaxTTL is the longest life CreateCode accepts (default 24 hours).
	MaxTTL time.Duration
	// MaxFailures is how many wrong guesses lock a code (default 5).
	MaxFailures int
	// PerMinute is how many failed attempts an address may make a minute
	// (default 10), and Burst how many at once (default PerMinute). The
	// count is kept in the store, so it holds across hub replicas.
	PerMinute, Burst int
	// KeepEnded is how long a code is kept after it expires, so that
	// "already used" and "expired" can still be told (default 24 hours).
	KeepEnded time.Duration
}

// Service creates and redeems pairing codes. It is safe for concurrent use.
type Service struct {
	opts   Options
	secret []byte
	every  time.Duration // an address gains one attempt every `every`
}

// New returns a Service; it reads the server secret from the store.
func New(ctx context.Context, opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("pairing: no store")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = 15 * time.Minute
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = 24 * time.Hour
	}
	if opts.MaxFailures <= 0 {
		opts.MaxFailures = 5
	}
	if opts.PerMinute <= 0 {
		opts.PerMinute = 10
	}
	if opts.Burst <= 0 {
		opts.Burst = opts.PerMinute
	}
	if opts.KeepEnded <= 0 {
		opts.KeepEnded = 24 * time.Hour
	}
	secret, err := opts.Store.ServerSecret(ctx)
	if err != nil {
		return nil, fmt.Errorf("pairing: %w", err)
	}
	if len(secret) < 32 {
		return nil, fmt.Errorf("pairing: server secret has %d bytes, want 32", len(secret))
	}
	return &Service{opts: opts, secret: secret, every: time.Minute / time.Duration(opts.PerMinute)}, nil
}

// Why a pairing attempt failed. Redeem and CreateCode return an *Error that
// wraps one of these; match with errors.Is.
var (
	ErrRateLimited   = errors.New("too many pairing attempts")     // HTTP 429, see Error.RetryAfter
	ErrInvalid       = errors.New("invalid pairing request")       // HTTP 400
	ErrWrongCode     = errors.New("pairing code not recognised")   // HTTP 403
	ErrExpired       = errors.New("pairing code expired")          // HTTP 410
	ErrUsed          = errors.New("pairing code already used")     // HTTP 410
	ErrLocked        = errors.New("pairing code locked")           // HTTP 410
	ErrKeyRegistered = errors.New("public key already registered") // HTTP 409
)

// Error is a failed pairing attempt, with a message for the person pairing.
type Error struct {
	Err        error         // one of the Err… sentinels
	Msg        string        // what went wrong and what to do
	RetryAfter time.Duration // for ErrRateLimited: when to try again
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

func fail(err error, format string, args ...any) *Error {
	return &Error{Err: err, Msg: fmt.Sprintf(format, args...)}
}

// Alphabet is the characters codes are made of: no 0/O, 1/I/L.
const Alphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// codeLen is the number of characters in a code, without the dash.
const codeLen = 8

// CreateCode makes a pairing code for the org, valid for ttl (0: the
// default), and records who made it (the name of the admin's token). The
// code is returned once, as XXXX-XXXX; only its HMACs are stored.
func (s *Service) CreateCode(ctx context.Context, orgID string, ttl time.Duration, createdBy string) (code string, expires time.Time, err error) {
	if ttl == 0 {
		ttl = s.opts.DefaultTTL
	}
	if ttl < time.Minute || ttl > s.opts.MaxTTL {
		return "", time.Time{}, fail(ErrInvalid, "a pairing code must live between 1m and %s, not %s", ago(s.opts.MaxTTL), ttl)
	}
	now := s.opts.Now()
	// Housekeeping: drop codes long expired, so their selectors are free.
	if _, err := s.opts.Store.DeletePairingCodes(ctx, now.Add(-s.opts.KeepEnded)); err != nil {
		return "", time.Time{}, fmt.Errorf("create pairing code: %w", err)
	}
	if _, err := s.opts.Store.DeleteRateLimits(ctx, now); err != nil {
		return "", time.Time{}, fmt.Errorf("create pairing code: %w", err)
	}
	for range 8 {
		norm := newCode()
		sel, mac := s.hmacs(norm)
		c, err := s.opts.Store.CreatePairingCode(ctx, store.PairingCode{
			OrgID: orgID, Selector: sel, MAC: mac, CreatedBy: createdBy, CreatedAt: now, ExpiresAt: now.Add(ttl),
		})
		if errors.Is(err, store.ErrConflict) {
			continue // another code starts with the same half: draw again
		}
		if err != nil {
			return "", time.Time{}, fmt.Errorf("create pairing code: %w", err)
		}
		return norm[:codeLen/2] + "-" + norm[codeLen/2:], c.ExpiresAt, nil
	}
	return "", time.Time{}, errors.New("create pairing code: no free code found; too many live codes")
}

// newCode draws a normalised code uniformly from Alphabet.
func newCode() string {
	const limit = 256 - 256%len(Alphabet) // reject bytes past the last whole run of the alphabet
	out := make([]byte, 0, codeLen)
	buf := make([]byte, 16)
	for len(out) < codeLen {
		rand.Read(buf)
		for _, b := range buf {
			if int(b) < limit && len(out) < codeLen {
				out = append(out, Alphabet[int(b)%len(Alphabet)])
			}
		}
	}
	return string(out)
}

// hmacs returns the selector (first half) and MAC (whole code) of a
// normalised code. The labels keep the two from ever being equal.
func (s *Service) hmacs(norm string) (sel, mac []byte) {
	h := hmac.New(sha256.New, s.secret)
	h.Write([]byte("agentd pairing selector v1\x00" + norm[:codeLen/2]))
	sel = h.Sum(nil)
	h = hmac.New(sha256.New, s.secret)
	h.Write([]byte("agentd pairing code v1\x00" + norm))
	return sel, h.Sum(nil)
}

// Normalize upper-cases a code and drops spaces and dashes. It fails if what
// is left is not 8 characters of Alphabet; the error never repeats the input.
func Normalize(code string) (string, error) {
	if len(code) > 64 {
		return "", fail(ErrWrongCode, "that is too long for a pairing code; codes look like ABCD-EF23")
	}
	var b strings.Builder
	for _, r := range code {
		switch {
		case r == '-' || unicode.IsSpace(r):
			continue
		case 'a' <= r && r <= 'z':
			r -= 'a' - 'A'
		}
		if !strings.ContainsRune(Alphabet, r) {
			return "", fail(ErrWrongCode, "pairing code has a character codes never use; codes are letters except I, L and O, and digits 2-9, like ABCD-EF23")
		}
		b.WriteRune(r)
	}
	if b.Len() != codeLen {
		return "", fail(ErrWrongCode, "a pairing code has 8 characters, like ABCD-EF23; that had %d", b.Len())
	}
	return b.String(), nil
}

// MachineRequest is what a machine sends with its code.
type MachineRequest struct {
	PublicKey []byte // Ed25519, 32 bytes
	Hostname  string // required
	OS        string // GOOS, e.g. "linux"
	Arch      string // GOARCH, e.g. "amd64"
	Name      string // shown to people; default the hostname
	Version   string // agentd version
}

// Redeem pairs the machine described by req into the org of code, and
// returns the new machine's ID and the org's name. remoteAddr is the
// client's address ("ip:port" or "ip"); behind a reverse proxy the caller
// must pass the client's, not the proxy's.
func (s *Service) Redeem(ctx context.Context, code, remoteAddr string, req MachineRequest) (machineID, orgName string, err error) {
	key, host := "pair "+clientKey(remoteAddr), clientHost(remoteAddr)
	ok, wait, err := s.opts.Store.TakeToken(ctx, key, s.every, s.opts.Burst, s.opts.Now())
	if err != nil {
		return "", "", fmt.Errorf("redeem pairing code: %w", err)
	}
	if !ok {
		wait = (wait + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
		return "", "", &Error{
			Err:        ErrRateLimited,
			Msg:        fmt.Sprintf("too many pairing attempts from this address; try again in %s", wait),
			RetryAfter: wait,
		}
	}
	m, err := s.redeem(ctx, code, host, req)
	if err != nil {
		return "", "", err
	}
	if err := s.opts.Store.ReturnToken(ctx, key, s.every); err != nil {
		return "", "", fmt.Errorf("redeem pairing code: %w", err)
	}
	return m.ID, m.orgName, nil
}

type paired struct {
	store.Machine
	orgName string
}

func (s *Service) redeem(ctx context.Context, code, from string, req MachineRequest) (paired, error) {
	m, err := validate(req)
	if err != nil {
		return paired{}, err
	}
	norm, err := Normalize(code)
	if err != nil {
		return paired{}, err
	}
	now := s.opts.Now()
	sel, mac := s.hmacs(norm)
	c, err := s.opts.Store.PairingCodeBySelector(ctx, sel)
	if errors.Is(err, store.ErrNotFound) {
		return paired{}, wrongCode()
	}
	if err != nil {
		return paired{}, fmt.Errorf("redeem pairing code: %w", err)
	}
	if !hmac.Equal(c.MAC, mac) {
		if c.Live(now) {
			_, err := s.opts.Store.FailPairingCode(ctx, c.ID, s.opts.MaxFailures, now)
			if err != nil && !errors.Is(err, store.ErrPrecondition) && !errors.Is(err, store.ErrNotFound) {
				return paired{}, fmt.Errorf("redeem pairing code: %w", err)
			}
		}
		return paired{}, wrongCode()
	}
	// The whole code is right: from here on the answers may be specific.
	if !c.Live(now) {
		return s.settled(ctx, c, now, m.PublicKey)
	}
	got, err := s.opts.Store.RedeemPairingCode(ctx, c.ID, from, now, m)
	switch {
	case errors.Is(err, store.ErrPrecondition):
		// Another attempt got there first: say what became of the code.
		if c, err = s.opts.Store.PairingCodeBySelector(ctx, sel); err != nil {
			return paired{}, fmt.Errorf("redeem pairing code: %w", err)
		}
		if c.Live(now) {
			return paired{}, errors.New("redeem pairing code: the store refused a live code")
		}
		return s.settled(ctx, c, now, m.PublicKey)
	case errors.Is(err, store.ErrConflict):
		return paired{}, fail(ErrKeyRegistered, "this machine's public key is registered already; run `agentd unpair` on it first, or pair with a new key")
	case err != nil:
		return paired{}, fmt.Errorf("redeem pairing code: %w", err)
	}
	return s.withOrg(ctx, got)
}

func (s *Service) withOrg(ctx context.Context, m store.Machine) (paired, error) {
	org, err := s.opts.Store.Org(ctx, m.OrgID)
	if err != nil {
		return paired{}, fmt.Errorf("redeem pairing code: %w", err)
	}
	return paired{Machine: m, orgName: org.Name}, nil
}

func wrongCode() *Error {
	return fail(ErrWrongCode, "pairing code not recognised; check it, or ask your admin for a new one")
}

// settled answers a correct code that is no longer live. If it was used by
// the same key, the earlier response was lost and this is the same pairing
// again: it returns that machine.
func (s *Service) settled(ctx context.Context, c store.PairingCode, now time.Time, key ed25519.PublicKey) (paired, error) {
	switch {
	case !c.UsedAt.IsZero():
		if c.UsedBy != "" {
			m, err := s.opts.Store.Machine(ctx, c.UsedBy)
			if err == nil && bytes.Equal(m.PublicKey, key) && m.RevokedAt.IsZero() {
				return s.withOrg(ctx, m)
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return paired{}, fmt.Errorf("redeem pairing code: %w", err)
			}
		}
		return paired{}, fail(ErrUsed, "pairing code was used %s ago, and a code pairs one machine; ask your admin for a new one", ago(now.Sub(c.UsedAt)))
	case !c.LockedAt.IsZero():
		return paired{}, fail(ErrLocked, "pairing code is locked after %d wrong attempts; ask your admin for a new one", c.FailedAttempts)
	default:
		return paired{}, fail(ErrExpired, "pairing code expired %s ago; ask your admin for a new one", ago(now.Sub(c.ExpiresAt)))
	}
}

// ago renders a duration coarsely: "45s", "3m", "5h", "2d".
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// Limits on what a machine may call itself.
const (
	maxHostname = 253 // bytes, as DNS
	maxName     = 64  // characters
)

var (
	goName  = regexp.MustCompile(`^[a-z0-9_]{0,32}$`)
	version = regexp.MustCompile(`^[A-Za-z0-9._+-]{0,64}$`)
)

// validate checks req and returns the machine to create.
func validate(req MachineRequest) (store.Machine, error) {
	bad := func(format string, args ...any) (store.Machine, error) {
		return store.Machine{}, fail(ErrInvalid, "invalid pairing request: "+format, args...)
	}
	if len(req.PublicKey) != ed25519.PublicKeySize {
		return bad("public key has %d bytes; want a %d-byte Ed25519 public key", len(req.PublicKey), ed25519.PublicKeySize)
	}
	if bytes.Equal(req.PublicKey, make([]byte, ed25519.PublicKeySize)) {
		return bad("public key is all zeros")
	}
	host := strings.TrimSpace(req.Hostname)
	if err := text("hostname", host, maxHostname, false); err != nil {
		return bad("%s", err)
	}
	if host == "" {
		return bad("hostname is empty")
	}
	name := strings.TrimSpace(req.Name)
	if err := text("name", name, maxName, true); err != nil {
		return bad("%s", err)
	}
	if name == "" {
		name = host
		if utf8.RuneCountInString(name) > maxName {
			name = string([]rune(name)[:maxName])
		}
	}
	if !goName.MatchString(req.OS) {
		return bad("os must be up to 32 characters of a-z, 0-9 and _ (like linux)")
	}
	if !goName.MatchString(req.Arch) {
		return bad("arch must be up to 32 characters of a-z, 0-9 and _ (like amd64)")
	}
	if !version.MatchString(req.Version) {
		return bad("version must be up to 64 characters of letters, digits and ._+-")
	}
	return store.Machine{
		Name: name, Hostname: host, OS: req.OS, Arch: req.Arch, Version: req.Version,
		PublicKey: ed25519.PublicKey(bytes.Clone(req.PublicKey)),
	}, nil
}

// text checks a free-text field: valid UTF-8, no control characters, at most
// limit bytes (or, if runes, characters).
func text(field, s string, limit int, runes bool) error {
	n := len(s)
	if runes {
		n = utf8.RuneCountInString(s)
	}
	switch {
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", field)
	case n > limit && runes:
		return fmt.Errorf("%s has %d characters; at most %d", field, n, limit)
	case n > limit:
		return fmt.Errorf("%s has %d bytes; at most %d", field, n, limit)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%s contains control characters", field)
	}
	return nil
}
