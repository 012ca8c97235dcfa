package agentd

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/errs"
)

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
// its errs.Kind (or the os error it wraps), the message unchanged. An error
// that already carries a status passes through.
func statusError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
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

// invalidf is the INVALID_ARGUMENT error for a malformed request field.
func invalidf(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}
