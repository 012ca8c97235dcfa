package files

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Limits of Glob.
const (
	// DefaultGlobResults is how many paths Glob returns when not told.
	DefaultGlobResults = 1_000
	// MaxGlobResults is the most paths one Glob may ask for.
	MaxGlobResults = 100_000
)

// GlobOptions says which paths Glob returns.
type GlobOptions struct {
	// Pattern has *, ?, [...], {a,b} and ** (any number of directories),
	// e.g. "**/*_test.go". It is relative to Path unless absolute. A
	// trailing "/" matches directories only.
	Pattern string
	// Path is the directory a relative pattern starts from (empty: the
	// workspace).
	Path string
	// NoIgnore does not honour .gitignore files.
	NoIgnore bool
	// Hidden lets wildcards match names starting with "."; a pattern
	// component that itself starts with "." (".github/**") matches them
	// without it. .git is never matched.
	Hidden bool
	// MaxResults stops after this many paths (0: DefaultGlobResults).
	MaxResults int
}

// GlobResult holds the paths a pattern matched.
type GlobResult struct {
	// Paths are absolute, sorted by path component by component (a
	// directory's entries come right after it), files and directories.
	Paths []string
	// Truncated is true when MaxResults cut the list short.
	Truncated bool
}

// Glob returns the files and directories matching a pattern, honouring
// .gitignore files unless told not to. Symlinks are matched but not
// followed.
func (f *FS) Glob(ctx context.Context, opts GlobOptions) (GlobResult, error) {
	pat := opts.Pattern
	switch {
	case pat == "":
		return GlobResult{}, errs.New(errs.Invalid, "pattern is empty; give a glob such as **/*.go")
	case len(pat) > MaxPathLen:
		return GlobResult{}, errs.New(errs.Invalid, "pattern is %d bytes; the limit is %d", len(pat), MaxPathLen)
	case strings.IndexByte(pat, 0) >= 0 || !utf8.ValidString(pat):
		return GlobResult{}, errs.New(errs.Invalid, "pattern %q contains a NUL byte or invalid UTF-8", pat)
	case !doublestar.ValidatePattern(pat):
		return GlobResult{}, errs.New(errs.Invalid, "pattern %q is not a valid glob: check for an unclosed [ or {", pat)
	case opts.MaxResults < 0 || opts.MaxResults > MaxGlobResults:
		return GlobResult{}, errs.New(errs.Invalid, "max_results %d is out of range: give 0 (default %d) to %d", opts.MaxResults, DefaultGlobResults, MaxGlobResults)
	}
	limit := opts.MaxResults
	if limit == 0 {
		limit = DefaultGlobResults
	}

	var base string
	switch {
	case filepath.IsAbs(pat):
		base, pat = "/", strings.TrimLeft(pat, "/")
	case pat == "~" || strings.HasPrefix(pat, "~/"):
		base, pat = f.home, strings.TrimLeft(strings.TrimPrefix(pat, "~"), "/")
	default:
		path := opts.Path
		if path == "" {
			path = f.workspace
		}
		b, err := f.Resolve(path)
		if err != nil {
			return GlobResult{}, err
		}
		fi, err := os.Stat(b)
		if err != nil {
			return GlobResult{}, f.pathError(b, err)
		}
		if !fi.IsDir() {
			return GlobResult{}, errs.New(errs.Precondition, "%s is not a directory; give the directory the pattern starts from", b)
		}
		base = b
	}
	for strings.HasPrefix(pat, "./") {
		pat = strings.TrimLeft(pat[2:], "/")
	}
	dirOnly := strings.HasSuffix(pat, "/")
	pat = strings.TrimRight(pat, "/")

	static, rest := doublestar.SplitPattern(pat)
	root := filepath.Join(base, static)
	if pat == "" || !hasMeta(rest) {
		// No wildcards: the pattern names one path.
		p := filepath.Join(base, pat)
		fi, err := os.Lstat(p)
		if err != nil || (dirOnly && !fi.IsDir()) {
			return GlobResult{Paths: []string{}}, nil
		}
		return GlobResult{Paths: []string{p}}, nil
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return GlobResult{Paths: []string{}}, nil
	}

	segs := strings.Split(rest, "/")
	wopts := walkOptions{hidden: opts.Hidden || mentionsHidden(segs), noIgnore: opts.NoIgnore}
	deep := strings.Contains(rest, "**")
	if !deep {
		wopts.maxDepth = len(segs)
	}
	prune := !strings.Contains(rest, "{")

	res := GlobResult{Paths: []string{}}
	err := walkTree(ctx, root, wopts, func(p, rel string, typ fs.FileMode) error {
		if typ.IsDir() && prune {
			// Skip a directory no match can be below: compare it with as
			// many leading pattern components, up to the first "**".
			k := strings.Count(rel, "/") + 1
			if k < len(segs) && !strings.Contains(strings.Join(segs[:k], "/"), "**") &&
				!doublestar.MatchUnvalidated(strings.Join(segs[:k], "/"), rel) {
				return errSkipDir
			}
		}
		if dirOnly && !typ.IsDir() {
			return nil
		}
		if !doublestar.MatchUnvalidated(rest, rel) {
			return nil
		}
		if len(res.Paths) == limit {
			res.Truncated = true
			return errStopWalk
		}
		res.Paths = append(res.Paths, p)
		return nil
	})
	if err != nil && !errors.Is(err, errStopWalk) {
		return GlobResult{}, err
	}
	return res, nil
}

// hasMeta reports whether a glob has wildcards.
func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[{\\") }

// mentionsHidden reports whether a pattern component asks for hidden names
// by starting with a dot.
func mentionsHidden(segs []string) bool {
	for _, s := range segs {
		if strings.HasPrefix(s, ".") && s != "." && s != ".." {
			return true
		}
	}
	return false
}
