package store

import (
	"context"
	"time"
)

// SandboxProcesses keeps the records of the processes a lifecycle step of
// a sandbox ended (a stop, an archive, a delete): the sandbox's agentd,
// whose own records they were, went with its container, and the hub
// answers for them afterwards (attach, wait, ps), from any replica and
// after a restart. The records go with their sandbox.
type SandboxProcesses interface {
	// SetSandboxProcesses replaces the sandbox's listed (not ended)
	// processes with procs, as its agentd listed them before a pause or
	// a stop; ended records stay. ErrNotFound if there is no such sandbox.
	SetSandboxProcesses(ctx context.Context, sandboxID string, procs []SandboxProcess) error
	// EndSandboxProcesses records that the sandbox's listed processes
	// ended at `at` for reason, and returns them (none: nil).
	EndSandboxProcesses(ctx context.Context, sandboxID, reason string, at time.Time) ([]SandboxProcess, error)
	// SandboxProcesses returns the sandbox's records: the ended ones in
	// the order they ended, then the listed ones.
	SandboxProcesses(ctx context.Context, sandboxID string) ([]SandboxProcess, error)
}

// SandboxProcess is the record of one process of a sandbox.
type SandboxProcess struct {
	SandboxID string
	ID        string // the process id agentd gave it (p-…)
	// Info is the process as its agentd described it (the hub's encoding;
	// the store keeps it as it is given).
	Info []byte
	// EndedAt is when a lifecycle step ended it (zero: not ended).
	EndedAt time.Time
	// Reason says which ("sandbox stopped: idle 30m").
	Reason string
}

// Leases elect the one replica that runs a job for a while (the archive
// store's GC): whoever holds a name's lease until it expires.
type Leases interface {
	// AcquireLease takes lease name for holder until now+ttl when it is
	// free or expired, or extends holder's own; false when another
	// holder's lease has not expired.
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	// ReleaseLease gives up holder's lease name (a lease another holder
	// took since stays).
	ReleaseLease(ctx context.Context, name, holder string) error
}
