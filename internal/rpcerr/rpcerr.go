// Package rpcerr is the one place where domain errors become gRPC status
// errors, for every server of the module (the daemon's and the hub's).
//
// Handlers and the packages under them return domain errors: an
// *errs.Error of some Kind, an os or context error, or a sentinel wrapped
// in one. The servers install Unary and Stream as their outermost
// interceptors, so a status code is made at the edge and nowhere else;
// a status that came from elsewhere (a forwarded call, a failed Send or
// Recv) passes through unchanged.
package rpcerr

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/errs"
)

var kindCodes = map[errs.Kind]codes.Code{
	errs.Invalid:         codes.InvalidArgument,
	errs.NotFound:        codes.NotFound,
	errs.Exists:          codes.AlreadyExists,
	errs.Precondition:    codes.FailedPrecondition,
	errs.Permission:      codes.PermissionDenied,
	errs.Exhausted:       codes.ResourceExhausted,
	errs.Unavailable:     codes.Unavailable,
	errs.Canceled:        codes.Canceled,
	errs.Timeout:         codes.DeadlineExceeded,
	errs.Unauthenticated: codes.Unauthenticated,
	errs.Unimplemented:   codes.Unimplemented,
}

// Status turns a domain error into a gRPC status error: the code from its
// errs.Kind (or the os or context error it wraps), the message unchanged.
// An error that carries a status anywhere in its chain passes through as
// it is; an error of no known kind is INTERNAL.
func Status(err error) error {
	if err == nil {
		return nil
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return err
	}
	return status.Error(Code(err), err.Error())
}

// Code is the status code Status gives err (OK for nil).
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	if c, ok := kindCodes[errs.KindOf(err)]; ok {
		return c
	}
	return codes.Internal
}

// Message is err's message as a caller reads it: a status's message
// without the "rpc error: code = …" prefix (the whole text of an error
// that wraps one, as grpc sends it), else err.Error().
func Message(err error) string { return status.Convert(err).Message() }

// Unary maps a unary handler's error with Status.
func Unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		return nil, Status(err)
	}
	return resp, nil
}

// Stream maps a streaming handler's error with Status.
func Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return Status(handler(srv, ss))
}
