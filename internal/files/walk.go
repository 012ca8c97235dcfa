package files

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// errSkipDir, returned by a walk callback for a directory, skips its
// entries; errStopWalk ends the walk without an error.
var (
	errSkipDir  = errors.New("skip directory")
	errStopWalk = errors.New("stop walk")
)

// walkOptions says which entries a walk visits.
type walkOptions struct {
	hidden   bool // visit names starting with "." (.git is never visited)
	noIgnore bool // do not honour .gitignore files
	// maxDepth stops descending below this many levels (0: no limit).
	maxDepth int
	// onError is told about directories that cannot be read (optional).
	onError func(path string, err error)
}

// walkVisit is called for each entry: its absolute path, its path
// relative to the walk root with "/" separators, and its type bits.
type walkVisit func(path, rel string, typ fs.FileMode) error

// walkTree visits the entries below root (not root itself) depth first,
// in name order, skipping hidden and ignored entries as opts says.
// Symlinks are visited but not followed.
func walkTree(ctx context.Context, root string, opts walkOptions, visit walkVisit) error {
	var rules ignoreRules
	if !opts.noIgnore {
		rules = ancestorRules(root)
	}
	err := walkDir(ctx, root, "", 1, rules, opts, visit)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

func walkDir(ctx context.Context, dir, rel string, depth int, rules ignoreRules, opts walkOptions, visit walkVisit) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	des, err := os.ReadDir(dir)
	if err != nil && opts.onError != nil {
		opts.onError(dir, err)
	}
	if !opts.noIgnore {
		rules = rules.with(dir)
	}
	for _, de := range des {
		name := de.Name()
		if name == ".git" || (!opts.hidden && strings.HasPrefix(name, ".")) {
			continue
		}
		p := filepath.Join(dir, name)
		typ := de.Type()
		isDir := typ.IsDir()
		if len(rules) > 0 && rules.ignored(p, isDir) {
			continue
		}
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		err := visit(p, r, typ)
		if errors.Is(err, errSkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if isDir && (opts.maxDepth == 0 || depth < opts.maxDepth) {
			if err := walkDir(ctx, p, r, depth+1, rules, opts, visit); err != nil {
				return err
			}
		}
	}
	return nil
}
