package pyrun

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// secretPrefix starts the names of the daemon's own variables; they never
// reach an interpreter.
const secretPrefix = "AGENTD_"

// cleanEnv returns env without AGENTD_* variables and malformed entries,
// keeping only the last entry of a repeated name.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env))
	index := make(map[string]int, len(env))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.HasPrefix(k, secretPrefix) || strings.IndexByte(kv, 0) >= 0 {
			continue
		}
		if i, seen := index[k]; seen {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// mergeEnv returns base with the variables of over set; new names are
// appended in sorted order.
func mergeEnv(base []string, over map[string]string) []string {
	if len(over) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+over[k])
	}
	return out
}

// lookupEnv returns the value of name in env.
func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

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
	path, _ := lookupEnv(env, "PATH")
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
