package snapshot

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Limits on what a request may ask for.
const (
	MaxExcludes     = 1000
	MaxPatternBytes = 4096
	MaxLabelBytes   = 1024
)

// excluder matches paths against exclude patterns, with the rules of
// tar --exclude and .gitignore: a pattern without a slash matches a name
// at any depth ("node_modules", "*.o"); a pattern with one is matched
// against the whole path from the root ("build/out", "**/*.tmp", a
// leading "/" only anchors); a trailing slash matches directories only.
// An excluded directory is left out with everything below it.
type excluder struct {
	pats []pattern
}

type pattern struct {
	glob     string
	anchored bool
	dirOnly  bool
}

func newExcluder(patterns []string) (*excluder, error) {
	if len(patterns) > MaxExcludes {
		return nil, errs.New(errs.Invalid, "%d exclude patterns: at most %d", len(patterns), MaxExcludes)
	}
	x := &excluder{}
	for _, p := range patterns {
		if len(p) > MaxPatternBytes {
			return nil, errs.New(errs.Invalid, "exclude pattern of %d bytes: at most %d", len(p), MaxPatternBytes)
		}
		q := strings.TrimPrefix(p, "./")
		pat := pattern{}
		if strings.HasSuffix(q, "/") {
			pat.dirOnly = true
			q = strings.TrimRight(q, "/")
		}
		if strings.HasPrefix(q, "/") {
			pat.anchored = true
			q = strings.TrimLeft(q, "/")
		}
		if strings.Contains(q, "/") {
			pat.anchored = true
		}
		if q == "" {
			return nil, errs.New(errs.Invalid, "exclude pattern %q matches nothing: give a name or glob such as node_modules or **/*.o", p)
		}
		if !doublestar.ValidatePattern(q) {
			return nil, errs.New(errs.Invalid, "exclude pattern %q is not a valid glob (check its brackets and braces)", p)
		}
		pat.glob = q
		x.pats = append(x.pats, pat)
	}
	return x, nil
}

// match reports whether the entry at rel (base name name) is excluded.
func (x *excluder) match(rel, name string, isDir bool) bool {
	if x == nil {
		return false
	}
	for _, p := range x.pats {
		if p.dirOnly && !isDir {
			continue
		}
		subject := name
		if p.anchored {
			subject = rel
		}
		if doublestar.MatchUnvalidated(p.glob, subject) {
			return true
		}
	}
	return false
}

// skipList collects skipped paths, keeping at most MaxSkipped.
type skipList struct {
	mu   sync.Mutex
	list []Skip
	more int64
}

func (l *skipList) add(rel, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) >= MaxSkipped {
		l.more++
		return
	}
	l.list = append(l.list, Skip{Path: rel, Reason: reason})
}

func (l *skipList) sorted() []Skip {
	sort.Slice(l.list, func(i, j int) bool { return l.list[i].Path < l.list[j].Path })
	return l.list
}

// reason turns an error reading the tree into a few words.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		err = se.Err
	}
	return err.Error()
}

// node is an entry of a live tree.
type node struct {
	Entry
	abs  string
	gone bool // vanished or skipped after the walk
}

// walker lists a live tree.
type walker struct {
	s       *Store
	excl    *excluder
	skipped *skipList
	nodes   []node
}

// scanRoot checks that root is an absolute path of an existing directory
// outside the store and returns it cleaned.
func (s *Store) scanRoot(root, what string) (string, error) {
	if root == "" || !filepath.IsAbs(root) {
		return "", errs.New(errs.Invalid, "%s %q is not an absolute path", what, root)
	}
	if strings.IndexByte(root, 0) >= 0 {
		return "", errs.New(errs.Invalid, "%s contains a NUL byte", what)
	}
	root = filepath.Clean(root)
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errs.New(errs.NotFound, "%s %s does not exist", what, root)
	case err != nil:
		return "", errs.Wrap(errs.KindOf(err), err, "%s %s", what, root)
	case !fi.IsDir():
		return "", errs.New(errs.Precondition, "%s %s is a file, not a directory: snapshot the directory that holds it (with excludes for the rest)", what, root)
	}
	if within(root, s.dir) {
		return "", errs.New(errs.Invalid, "%s %s is inside the snapshot store", what, root)
	}
	return root, nil
}

// walk lists the tree at root, not following symlinks, leaving out
// excluded and protected paths and recording what it skips. The nodes come
// back sorted by path.
func (w *walker) walk(ctx context.Context, root string) ([]node, error) {
	if err := w.dir(ctx, root, ""); err != nil {
		return nil, err
	}
	sort.Slice(w.nodes, func(i, j int) bool { return w.nodes[i].Path < w.nodes[j].Path })
	return w.nodes, nil
}

func (w *walker) dir(ctx context.Context, abs, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(abs)
	var des []fs.DirEntry
	if err == nil {
		des, err = f.ReadDir(-1)
		f.Close()
	}
	if err != nil {
		if rel == "" {
			return errs.Wrap(errs.KindOf(err), err, "cannot list %s", abs)
		}
		w.skipped.add(rel, "cannot list directory: "+reason(err))
	}
	for _, de := range des {
		name := de.Name()
		childAbs := abs + string(filepath.Separator) + name
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		if w.s.protected(childAbs) || w.excl.match(childRel, name, de.IsDir()) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // gone since listed: nothing to keep
				w.skipped.add(childRel, reason(err))
			}
			continue
		}
		n := node{abs: childAbs, Entry: Entry{Path: childRel, Mode: unixMode(fi.Mode()), ModTime: fi.ModTime()}}
		switch m := fi.Mode(); {
		case m.IsRegular():
			n.Type = TypeFile
			n.Size = fi.Size()
			n.stamp = stampOf(fi)
			w.nodes = append(w.nodes, n)
		case m.IsDir():
			n.Type = TypeDir
			w.nodes = append(w.nodes, n)
			if err := w.dir(ctx, childAbs, childRel); err != nil {
				return err
			}
		case m&fs.ModeSymlink != 0:
			t, err := os.Readlink(childAbs)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					w.skipped.add(childRel, reason(err))
				}
				continue
			}
			n.Type = TypeSymlink
			n.Target = t
			w.nodes = append(w.nodes, n)
		case m&fs.ModeSocket != 0:
			w.skipped.add(childRel, "socket")
		case m&fs.ModeNamedPipe != 0:
			w.skipped.add(childRel, "named pipe")
		case m&fs.ModeDevice != 0:
			w.skipped.add(childRel, "device")
		default:
			w.skipped.add(childRel, "unsupported file type")
		}
	}
	return nil
}

// unchanged reports whether the live file n still looks as it did when
// the index entry e was read, so its content need not be read again.
func unchanged(n *node, e *Entry) bool {
	return e != nil && e.Type == TypeFile && !e.stamp.racy &&
		e.Size == n.Size && e.ModTime.Equal(n.ModTime) &&
		e.stamp.ctime == n.stamp.ctime && e.stamp.ino == n.stamp.ino && e.stamp.dev == n.stamp.dev
}

// readResult is what reading one file of a tree gave.
type readResult struct {
	stored int64  // compressed bytes added to the store
	skip   string // why it was skipped; "" if it was read
}

// readFile reads the live file n, hashes it and, with o set, stores it.
// It fills in n's hash, size (as read) and stamp. A file that cannot be
// read is skipped (readResult.skip); a file that vanished is marked gone;
// only a failure of the store is an error.
func (s *Store) readFile(o *op, n *node, sc *scratch) (readResult, error) {
	f, err := s.opts.Open(n.abs)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			n.gone = true
			return readResult{}, nil
		case errors.Is(err, syscall.ELOOP):
			return readResult{skip: "replaced by a symlink while the snapshot was taken"}, nil
		}
		return readResult{skip: reason(err)}, nil
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return readResult{skip: reason(err)}, nil
	}
	if !before.Mode().IsRegular() {
		return readResult{skip: "no longer a regular file"}, nil
	}
	// Read as much as the file held when it was opened, and record its
	// times from then. If it is written to meanwhile, its times change and
	// the next snapshot reads it again — unless the change falls within
	// the file system's timestamp granularity, but then the times recorded
	// are recent, and Create marks the entry racy, which has the same
	// effect.
	r := io.LimitReader(f, before.Size())
	var (
		h      string
		size   int64
		stored int64
	)
	if o != nil {
		h, size, stored, err = s.put(o, r, sc)
	} else {
		h, size, err = hashReader(r, sc.io)
		if err != nil {
			err = &sourceError{err}
		}
	}
	if err != nil {
		var se *sourceError
		if errors.As(err, &se) {
			return readResult{skip: "read error: " + reason(se.err)}, nil
		}
		return readResult{}, err
	}
	n.Size = size
	n.SHA256 = h
	n.Mode = unixMode(before.Mode())
	n.ModTime = before.ModTime()
	n.stamp = stampOf(before)
	if size != before.Size() {
		n.stamp.racy = true // it shrank while read
	}
	return readResult{stored: stored}, nil
}

// parallel runs fn(i) for every i in [0, n) on the store's workers and
// calls done(i) on the calling goroutine as each succeeds. It stops at the
// first error, or when ctx ends, and returns that error once every worker
// has stopped.
func (s *Store) parallel(ctx context.Context, n int, fn func(ctx context.Context, sc *scratch, i int) error, done func(i int)) error {
	if n == 0 {
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	workers := min(s.opts.Workers, n)
	next := make(chan int)
	results := make(chan result, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			sc := newScratch()
			defer sc.close()
			for i := range next {
				err := ctx.Err()
				if err == nil {
					err = fn(ctx, sc, i)
				}
				results <- result{i, err}
			}
		})
	}
	var firstErr error
	sent, pending := 0, 0
	for {
		feed := next
		if sent == n || firstErr != nil {
			feed = nil
		}
		if feed == nil && pending == 0 {
			break
		}
		var stop <-chan struct{}
		if firstErr == nil {
			stop = ctx.Done()
		}
		select {
		case feed <- sent:
			sent++
			pending++
		case r := <-results:
			pending--
			switch {
			case r.err == nil:
				done(r.i)
			case firstErr == nil:
				firstErr = r.err
				cancel()
			}
		case <-stop:
			firstErr = ctx.Err()
		}
	}
	close(next)
	wg.Wait()
	return firstErr
}

// validRel reports whether p is a clean relative "/"-separated path that
// stays below the root.
func validRel(p string) bool {
	if p == "" || p == "." || strings.HasPrefix(p, "/") || strings.IndexByte(p, 0) >= 0 || path.Clean(p) != p {
		return false
	}
	return p != ".." && !strings.HasPrefix(p, "../")
}

// validateEntries checks that entries form a tree that can be written
// below a root without escaping it: clean relative paths, sorted, no
// duplicates, and every parent a directory entry (never a file or a
// symlink, which a later entry could be written through).
func validateEntries(entries []Entry) error {
	types := make(map[string]Type, len(entries))
	for i := range entries {
		e := &entries[i]
		if !validRel(e.Path) {
			return errs.New(errs.Invalid, "unsafe path %q: paths must be relative and stay below the root", e.Path)
		}
		if i > 0 && entries[i-1].Path >= e.Path {
			return errs.New(errs.Invalid, "entries out of order or duplicated at %q", e.Path)
		}
		if dir := path.Dir(e.Path); dir != "." {
			t, ok := types[dir]
			switch {
			case !ok:
				return errs.New(errs.Invalid, "%q has no parent directory entry", e.Path)
			case t != TypeDir:
				return errs.New(errs.Invalid, "%q lies below %q, which is a %s, not a directory: writing it would go through that %s", e.Path, dir, t, t)
			}
		}
		types[e.Path] = e.Type
	}
	return nil
}
