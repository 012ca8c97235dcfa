package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
)

const (
	// maxRetain bounds RetainHead and RetainTail of one stream: enough to
	// keep every byte of a 1 GiB output for a later Attach (memory grows
	// only as output arrives).
	maxRetain = 1 << 30
	// minTail is the smallest tail kept: live subscribers read from the
	// tail, so it must hold at least a few chunks for output to flow.
	minTail = 64 << 10
)

// plan is a validated Spec, resolved against the Manager's settings.
type plan struct {
	spec             Spec
	path             string   // absolute path of the executable
	argv             []string // argv as the child sees it
	cmdLine          string   // Windows only: the raw command line, when not built from argv
	dir              string   // absolute working directory
	env              []string
	headCap, tailCap int64
	grace            time.Duration
}

// prepare validates spec and resolves the executable, the directory and the
// environment. Its errors are *errs.Error with messages meant for the agent.
func (m *Manager) prepare(spec Spec) (*plan, error) {
	p := &plan{spec: spec}
	switch {
	case len(spec.Argv) > 0 && spec.Command != "":
		return nil, errs.New(errs.Invalid, "set either argv or command, not both")
	case len(spec.Argv) == 0 && spec.Command == "":
		return nil, errs.New(errs.Invalid, "nothing to run: set argv or command")
	case len(spec.Argv) > 0 && spec.Argv[0] == "":
		return nil, errs.New(errs.Invalid, "argv[0] is empty: name the program to run")
	}
	for i, a := range spec.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errs.New(errs.Invalid, "argv[%d] contains a NUL byte", i)
		}
	}
	if strings.IndexByte(spec.Command, 0) >= 0 {
		return nil, errs.New(errs.Invalid, "command contains a NUL byte")
	}
	if strings.IndexByte(spec.Dir, 0) >= 0 {
		return nil, errs.New(errs.Invalid, "cwd contains a NUL byte")
	}
	for k, v := range spec.Env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return nil, errs.New(errs.Invalid, "env name %q is not valid: it must be non-empty without '=' or NUL", k)
		case strings.IndexByte(v, 0) >= 0:
			return nil, errs.New(errs.Invalid, "env %s: value contains a NUL byte", k)
		case strings.HasPrefix(k, secretPrefix):
			return nil, errs.New(errs.Invalid, "env %s: AGENTD_* variables belong to the daemon and are never passed to commands", k)
		}
	}
	if spec.Pty != nil {
		if err := ptySupported(); err != nil {
			return nil, err
		}
	}
	switch {
	case spec.Timeout < 0:
		return nil, errs.New(errs.Invalid, "timeout %v is negative", spec.Timeout)
	case spec.Grace < 0:
		return nil, errs.New(errs.Invalid, "kill grace %v is negative", spec.Grace)
	case spec.RetainHead < 0 || spec.RetainHead > maxRetain:
		return nil, errs.New(errs.Invalid, "retain head %d bytes: want 0 to %d", spec.RetainHead, maxRetain)
	case spec.RetainTail < 0 || spec.RetainTail > maxRetain:
		return nil, errs.New(errs.Invalid, "retain tail %d bytes: want 0 to %d", spec.RetainTail, maxRetain)
	}

	p.grace = orDefault(spec.Grace, m.opts.DefaultGrace)
	p.headCap = orDefault(spec.RetainHead, m.opts.RetainHead)
	p.tailCap = max(orDefault(spec.RetainTail, m.opts.RetainTail), minTail)

	p.dir = spec.Dir
	if p.dir == "" {
		p.dir = m.opts.Dir
	} else if !filepath.IsAbs(p.dir) {
		p.dir = filepath.Join(m.opts.Dir, p.dir)
	}
	p.dir = filepath.Clean(p.dir)
	// The directory is checked only when something fails (the lookup
	// here, the start in Manager.start), to say which part is wrong: the
	// child's chdir checks it anyway, and each check is a walk from "/",
	// on a sandbox's root a round trip to the storage driver.

	p.env = m.env
	if m.opts.ExtraEnv != nil {
		extra := m.opts.ExtraEnv()
		for k := range extra {
			if strings.HasPrefix(k, secretPrefix) || k == "" || strings.ContainsAny(k, "=\x00") {
				delete(extra, k)
			}
		}
		p.env = MergeEnv(p.env, extra)
	}
	p.env = MergeEnv(p.env, spec.Env)
	if _, ok := spec.Env["PWD"]; !ok {
		p.env = append(p.env, "PWD="+p.dir)
	}
	if _, ok := LookupEnv(p.env, "TERM"); !ok && spec.Pty != nil {
		p.env = append(p.env, "TERM=xterm-256color")
	}

	if spec.Command != "" {
		p.argv, p.cmdLine = shellCommand(m.opts.Shell, spec.Command)
	} else {
		p.argv = append([]string(nil), spec.Argv...)
	}
	path, err := m.resolveProgram(p.argv[0], p.dir, p.env)
	if err != nil {
		if derr := checkDir(p.dir); derr != nil {
			return nil, derr
		}
		return nil, err
	}
	p.path = path
	return p, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errs.New(errs.NotFound, "cwd %s does not exist", dir)
	case errors.Is(err, fs.ErrPermission):
		return errs.New(errs.Permission, "cwd %s: permission denied", dir)
	case err != nil:
		return errs.Wrap(errs.KindOf(err), err, "cwd %s", dir)
	case !fi.IsDir():
		return errs.New(errs.Invalid, "cwd %s is not a directory", dir)
	}
	return nil
}
