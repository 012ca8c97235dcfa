package agentd

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// The handlers return domain errors (an *errs.Error, an os or context error,
// or a status from the stream they read); statusUnary and statusStream, the
// outermost interceptors, turn them into gRPC status errors in this one
// place, so no handler converts by hand.

var kindCodes = map[errs.Kind]codes.Code{
	errs.Invalid:      codes.InvalidArgument,
	errs.NotFound:     codes.NotFound,
	errs.Exists:       codes.AlreadyExists,
	errs.Precondition: codes.FailedPrecondition,
	errs.Permission:   codes.PermissionDenied,
	errs.Exhausted:    codes.ResourceExhausted,
	errs.Unavailable:  codes.Unavailable,
	errs.Canceled:     codes.Canceled,
	errs.Timeout:      codes.DeadlineExceeded,
}

// statusError turns a domain error into a gRPC status error: the code from
// its errs.Kind (or the os or context error it wraps), the message
// unchanged. An error that carries a status anywhere in its chain (a failed
// Send or Recv, the auth check) passes through as it is; an error of no
// known kind is INTERNAL.
func statusError(err error) error {
	if err == nil {
		return nil
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return err
	}
	code, ok := kindCodes[errs.KindOf(err)]
	if !ok {
		code = codes.Internal
	}
	return status.Error(code, err.Error())
}

// statusUnary maps a unary handler's error with statusError.
func statusUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		return nil, statusError(err)
	}
	return resp, nil
}

// statusStream maps a streaming handler's error with statusError.
func statusStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return statusError(handler(srv, ss))
}

// invalidf is the error for a malformed request field (INVALID_ARGUMENT).
func invalidf(format string, args ...any) error {
	return errs.New(errs.Invalid, format, args...)
}
