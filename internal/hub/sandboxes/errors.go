package sandboxes

import (
	"errors"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// The manager's errors are *errs.Error values (their Kind gives the status
// code at the hub's edge, their message is what the caller reads); those
// below also match a sentinel with errors.Is.
var (
	// ErrNotFound: the environment or the sandbox named is not in the org
	// (errs.NotFound).
	ErrNotFound = errors.New("not found")
	// ErrNotReady: the environment cannot run a sandbox now (its image is
	// missing, unvalidated or rejected, its sandbox stopped or did not
	// connect), and the call never runs elsewhere (errs.Precondition).
	ErrNotReady = errors.New("not ready")
	// ErrQuota: the org or the API token has as many sandboxes as its cap
	// (errs.Exhausted).
	ErrQuota = errors.New("sandbox cap reached")
	// ErrReplicaDown: the sandbox is on a hub replica that is not running,
	// or did not bring it online in time (errs.Unavailable).
	ErrReplicaDown = errors.New("sandbox's replica unavailable")
	// ErrEgress: the public network's egress rules are missing, so calls
	// to sandboxes on it are refused (errs.Precondition).
	ErrEgress = errors.New("egress rules missing")
)

// domainError is an *errs.Error that also matches its sentinel.
type domainError struct {
	err      *errs.Error
	sentinel error
}

func (e *domainError) Error() string   { return e.err.Error() }
func (e *domainError) Unwrap() []error { return []error{e.err, e.sentinel} }

// fail is an error of kind with the message, matching sentinel.
func fail(sentinel error, kind errs.Kind, format string, args ...any) error {
	return &domainError{err: errs.New(kind, format, args...), sentinel: sentinel}
}

// EngineError turns an engine error into the caller's: UNAVAILABLE or
// RESOURCE_EXHAUSTED when the engine says so, else FAILED_PRECONDITION;
// "what: err".
func EngineError(err error, what string) error {
	kind := errs.Precondition
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		kind = errs.Unavailable
	case errors.Is(err, sandbox.ErrExhausted):
		kind = errs.Exhausted
	}
	return errs.Wrap(kind, err, "%s", what)
}

// unavailable is an UNAVAILABLE error "what: err" (err's text only: a
// store's error is not the caller's to match).
func unavailable(what string, err error) error {
	return errs.New(errs.Unavailable, "%s: %v", what, err)
}
