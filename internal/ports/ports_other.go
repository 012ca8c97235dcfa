//go:build !linux

package ports

import "context"

// Listening is not implemented here (see ErrUnsupported).
func Listening(context.Context) ([]Socket, error) { return nil, ErrUnsupported }
