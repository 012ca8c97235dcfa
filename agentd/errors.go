package agentd

import (
	"github.com/devdepot-ai/agentd/internal/errs"
)

// The handlers return domain errors (an *errs.Error, an os or context error,
// or a status from the stream they read); rpcerr's interceptors, the
// outermost, turn them into gRPC status errors in one place, so no handler
// converts by hand.

// invalidf is the error for a malformed request field (INVALID_ARGUMENT).
func invalidf(format string, args ...any) error {
	return errs.New(errs.Invalid, format, args...)
}
