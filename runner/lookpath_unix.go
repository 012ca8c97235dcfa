//go:build unix

package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// defaultPath is searched when the environment has no PATH.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// LookPath finds the executable the child will run: file itself when it
// contains a slash (relative to dir), else the first executable file of that
// name in the directories of env's PATH. Relative PATH entries are skipped,
// as os/exec does, so that a command never runs from the working directory
// by accident.
func LookPath(file, dir string, env []string) (string, error) {
	return lookPath(file, dir, env, nil)
}

// resolveProgram is LookPath through the Manager's cache of lookups on a
// read-only root (none unless Options.ReadOnlyRoot).
func (m *Manager) resolveProgram(file, dir string, env []string) (string, error) {
	return lookPath(file, dir, env, m.look)
}

// lookPath is LookPath with the answers c can prove permanent remembered.
func lookPath(file, dir string, env []string, c *lookCache) (string, error) {
	if strings.Contains(file, "/") {
		path := file
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		if err := c.check(path); err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return "", errs.New(errs.NotFound, "command not found: %s does not exist", file)
			case errors.Is(err, fs.ErrPermission):
				return "", errs.New(errs.Permission, "cannot run %s: permission denied (not executable)", file)
			case errors.Is(err, errIsDir):
				return "", errs.New(errs.Invalid, "cannot run %s: it is a directory", file)
			}
			return "", errs.Wrap(errs.KindOf(err), err, "cannot run %s", file)
		}
		return path, nil
	}
	pathEnv, ok := LookupEnv(env, "PATH")
	if !ok {
		pathEnv = defaultPath
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(d) {
			continue
		}
		path := filepath.Join(d, file)
		if c.check(path) == nil {
			return path, nil
		}
	}
	return "", errs.New(errs.NotFound, "command not found: %s (PATH=%s)", file, pathEnv)
}

var errIsDir = errors.New("is a directory")

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errIsDir
	}
	if fi.Mode()&0o111 == 0 {
		return fs.ErrPermission
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fs.ErrPermission
	}
	return nil
}
