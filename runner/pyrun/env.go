package pyrun

import (
	"os"
	"path/filepath"
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

// lookPath finds the program name on the PATH of env, as a shell would; a
// name with a slash is taken as a path.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if isExecutable(name) {
			return name, nil
		}
		return "", errs.New(errs.Precondition, "python interpreter %s not found or not executable", name)
	}
	path, _ := runner.LookupEnv(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			if !filepath.IsAbs(p) {
				if abs, err := filepath.Abs(p); err == nil {
					p = abs
				}
			}
			return p, nil
		}
	}
	return "", errs.New(errs.Precondition, "%s not found on PATH", name)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
