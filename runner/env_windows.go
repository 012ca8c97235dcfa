package runner

import (
	"context"
	"os"
)

// LoginEnv returns the daemon's own environment on Windows: there is no
// login shell whose startup files would set up the user's variables (a
// service's environment already comes from the user's profile and the
// system settings), so shell is not run.
func LoginEnv(ctx context.Context, shell string) ([]string, error) {
	return os.Environ(), nil
}
