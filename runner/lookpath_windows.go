package runner

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// LookPath finds the executable the child will run: file itself when it
// contains a path separator or a drive (relative to dir), else the first
// file of that name in the directories of env's PATH. As with cmd.exe, a
// name without one of the extensions of PATHEXT (.COM, .EXE, .BAT, .CMD by
// default) is tried with each of them. Relative PATH entries and the
// working directory are not searched, as on unix, so that a command never
// runs from the working directory by accident. Environment names are
// matched without regard to case, as Windows does.
func LookPath(file, dir string, env []string) (string, error) {
	exts := pathExts(env)
	if strings.ContainsAny(file, `/\:`) {
		path := file
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		found, err := findExecutable(path, exts)
		if err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return "", errs.New(errs.NotFound, "command not found: %s does not exist", file)
			case errors.Is(err, fs.ErrPermission):
				return "", errs.New(errs.Permission, "cannot run %s: not an executable (its extension is not in PATHEXT=%s)", file, strings.Join(exts, ";"))
			case errors.Is(err, errIsDir):
				return "", errs.New(errs.Invalid, "cannot run %s: it is a directory", file)
			}
			return "", errs.Wrap(errs.KindOf(err), err, "cannot run %s", file)
		}
		return found, nil
	}
	pathEnv, ok := lookupEnvFold(env, "PATH")
	if !ok {
		root := cmp.Or(os.Getenv("SystemRoot"), `C:\Windows`)
		pathEnv = filepath.Join(root, "System32") + ";" + root
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(d) {
			continue
		}
		if found, err := findExecutable(filepath.Join(d, file), exts); err == nil {
			return found, nil
		}
	}
	return "", errs.New(errs.NotFound, "command not found: %s (PATH=%s)", file, pathEnv)
}

var errIsDir = errors.New("is a directory")

// findExecutable returns path when its extension is one of exts, else the
// first of path+ext that exists.
func findExecutable(path string, exts []string) (string, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != "" && slices.Contains(exts, ext) {
		return path, checkExecutable(path)
	}
	for _, e := range exts {
		if checkExecutable(path+e) == nil {
			return path + e, nil
		}
	}
	if err := checkExecutable(path); err != nil {
		return "", err
	}
	return "", fs.ErrPermission // it exists, but Windows would not run it
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errIsDir
	}
	return nil
}

// pathExts returns the lower-case extensions of env's PATHEXT.
func pathExts(env []string) []string {
	v, ok := lookupEnvFold(env, "PATHEXT")
	if !ok || v == "" {
		v = ".COM;.EXE;.BAT;.CMD"
	}
	var exts []string
	for _, e := range strings.Split(strings.ToLower(v), ";") {
		if e == "" {
			continue
		}
		if e[0] != '.' {
			e = "." + e
		}
		exts = append(exts, e)
	}
	return exts
}

// lookupEnvFold is LookupEnv with names compared without regard to case.
func lookupEnvFold(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// resolveProgram is LookPath: nothing is cached on Windows.
func (m *Manager) resolveProgram(file, dir string, env []string) (string, error) {
	return LookPath(file, dir, env)
}
