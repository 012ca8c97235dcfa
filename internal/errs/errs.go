// Package errs classifies domain errors so that the RPC edge can turn them
// into gRPC status codes without the domain packages importing gRPC.
//
// A domain package returns errs.New(errs.NotFound, "no file %s", path); the
// handler in package agentd maps the Kind to a status code. Errors from the os
// package (fs.ErrNotExist, fs.ErrPermission, ENOSPC, …) are classified too, so
// a wrapped *fs.PathError needs no extra wrapping.
package errs

import (
	"errors"
	"fmt"
)

// Kind says what sort of failure an error is, in terms a caller can act on.
type Kind int

// The kinds of failure. They mirror the gRPC codes the handlers use.
const (
	Unknown         Kind = iota // not classified: an internal error
	Invalid                     // the request itself is wrong (INVALID_ARGUMENT)
	NotFound                    // the thing named does not exist (NOT_FOUND)
	Exists                      // the thing to create exists already (ALREADY_EXISTS)
	Precondition                // the state of the world forbids it (FAILED_PRECONDITION)
	Permission                  // the OS refused access (PERMISSION_DENIED)
	Exhausted                   // a limit was hit: disk full, too large (RESOURCE_EXHAUSTED)
	Unavailable                 // try again later (UNAVAILABLE)
	Canceled                    // the caller went away (CANCELED)
	Timeout                     // a deadline passed (DEADLINE_EXCEEDED)
	Unauthenticated             // the caller is not known: no or a bad credential (UNAUTHENTICATED)
	Unimplemented               // no such operation here (UNIMPLEMENTED)
)

// Error is a classified error with a message meant for the agent that made
// the request: it says what is wrong and, where it can, what to do instead.
type Error struct {
	Kind Kind
	Msg  string
	Err  error // the underlying cause, if any
}

// Error returns the message, followed by the cause when there is one.
func (e *Error) Error() string {
	if e.Err != nil && e.Msg != "" {
		return e.Msg + ": " + e.Err.Error()
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error of the given kind with a formatted message.
func New(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error of the given kind that keeps err as its cause.
func Wrap(kind Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Err: err}
}

// KindOf reports the Kind of err: the Kind of the first *Error in its chain,
// else a classification of well-known os and context errors, else Unknown.
func KindOf(err error) Kind {
	if err == nil {
		return Unknown
	}
	var e *Error
	if errors.As(err, &e) && e.Kind != Unknown {
		return e.Kind
	}
	return classifyOS(err)
}
