package pyrun

import (
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/runner"
)

// validateEnv checks the variables a run sets.
func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errs.New(errs.Invalid, "env: invalid variable name %q (must be non-empty, without '=' or NUL)", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return errs.New(errs.Invalid, "env: the value of %s contains a NUL byte", k)
		}
	}
	return nil
}

// lookPath finds the interpreter the way a command would find it (see
// runner.LookPath); a failure is a precondition the user must fix.
func lookPath(name string, env []string) (string, error) {
	p, err := runner.LookPath(name, "/", env)
	if err == nil {
		return p, nil
	}
	if strings.Contains(name, "/") {
		return "", errs.New(errs.Precondition, "python interpreter %s not found or not executable", name)
	}
	return "", errs.New(errs.Precondition, "%s not found on PATH", name)
}
