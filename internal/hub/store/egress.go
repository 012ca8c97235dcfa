package store

import (
	"context"
	"time"
)

// EgressLists stores allow lists: each sandbox's, which changes while it
// runs (a generation per change), and each environment's, for its new
// sandboxes. Entries are stored as given, in canonical form (package
// allowlist checks them; the store does not).
type EgressLists interface {
	// CreateSandboxEgress stores a new sandbox's allow list at generation
	// 1. ErrNotFound for a missing sandbox, ErrConflict if it has one.
	CreateSandboxEgress(ctx context.Context, id string, allow []string, at time.Time) (SandboxEgress, error)
	// SandboxEgress returns a sandbox's allow list; ErrNotFound when it has
	// none (made without one, or before lists were stored).
	SandboxEgress(ctx context.Context, id string) (SandboxEgress, error)
	// ChangeSandboxEgress replaces the list of generation gen with allow,
	// at generation gen+1 (cut: which is also its CutGen). ErrConflict when
	// the list is no longer at gen (changed meanwhile: read it again),
	// ErrNotFound when there is none.
	ChangeSandboxEgress(ctx context.Context, id string, gen int64, allow []string, cut bool, at time.Time) (SandboxEgress, error)
	// SetEnvironmentAllow stores the allow list of the org's new sandboxes
	// of environment env (any name, builtin's included); empty: none.
	// DeleteEnvironment deletes it.
	SetEnvironmentAllow(ctx context.Context, orgID, env string, allow []string) error
	// EnvironmentAllow returns what SetEnvironmentAllow stored (nil: none).
	EnvironmentAllow(ctx context.Context, orgID, env string) ([]string, error)
}

// SandboxEgress is a sandbox's allow list as it is now.
type SandboxEgress struct {
	// Allow is the list (empty: nothing is allowed).
	Allow []string
	// Gen is its generation: 1 as the sandbox was made, one more per
	// change.
	Gen int64
	// CutGen is the generation of the latest change that cut connections
	// open before it (0: none did).
	CutGen int64
	// ChangedAt is when it got this generation.
	ChangedAt time.Time
}
