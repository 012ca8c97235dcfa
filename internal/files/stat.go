package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Limits of List.
const (
	// DefaultListEntries is how many entries List returns when not told.
	DefaultListEntries = 10_000
	// MaxListEntries is the most entries one List call may ask for.
	MaxListEntries = 100_000
	// MaxListDepth is the deepest List may descend.
	MaxListDepth = 1_000
)

// Stat describes path. A final symlink is described itself, not followed.
func (f *FS) Stat(ctx context.Context, path string) (Entry, error) {
	p, err := f.Resolve(path)
	if err != nil {
		return Entry{}, err
	}
	fi, err := f.lstat(p)
	if err != nil {
		return Entry{}, err
	}
	return entryOf(p, fi), nil
}

// ListOptions says how much List returns.
type ListOptions struct {
	// Depth is how many levels to descend: 0 or 1 lists the directory's
	// own entries, 2 also the entries of its subdirectories, and so on.
	Depth int
	// Hidden includes entries whose name starts with a dot.
	Hidden bool
	// MaxEntries stops the listing after this many entries
	// (0: DefaultListEntries).
	MaxEntries int
}

// ListResult is what List found.
type ListResult struct {
	// Entries are sorted by name, depth first: a directory is followed by
	// its own entries (when Depth reaches them) before its next sibling.
	Entries []Entry
	// Truncated is true when MaxEntries cut the listing short.
	Truncated bool
}

// List lists the directory at path, recursively up to opts.Depth levels.
// Symlinks are listed, not followed, except that path itself may be a
// symlink to a directory. A path that is not a directory lists itself.
// Subdirectories that cannot be read are listed without their entries.
func (f *FS) List(ctx context.Context, path string, opts ListOptions) (ListResult, error) {
	p, err := f.Resolve(path)
	if err != nil {
		return ListResult{}, err
	}
	switch {
	case opts.Depth < 0 || opts.Depth > MaxListDepth:
		return ListResult{}, errs.New(errs.Invalid, "depth %d is out of range: give 0 to %d (1 lists the directory's own entries)", opts.Depth, MaxListDepth)
	case opts.MaxEntries < 0 || opts.MaxEntries > MaxListEntries:
		return ListResult{}, errs.New(errs.Invalid, "max_entries %d is out of range: give 0 (default %d) to %d", opts.MaxEntries, DefaultListEntries, MaxListEntries)
	}
	depth := max(opts.Depth, 1)
	limit := opts.MaxEntries
	if limit == 0 {
		limit = DefaultListEntries
	}

	fi, err := os.Stat(p) // follow: listing a symlink to a directory lists the directory
	if err != nil {
		if lfi, lerr := os.Lstat(p); lerr == nil {
			// A dangling symlink: describe the link.
			return ListResult{Entries: []Entry{entryOf(p, lfi)}}, nil
		}
		return ListResult{}, f.pathError(p, err)
	}
	if !fi.IsDir() {
		lfi, err := f.lstat(p)
		if err != nil {
			return ListResult{}, err
		}
		return ListResult{Entries: []Entry{entryOf(p, lfi)}}, nil
	}
	l := lister{ctx: ctx, hidden: opts.Hidden, limit: limit}
	if err := l.list(p, depth, true); err != nil {
		if errors.Is(err, errListFull) {
			return ListResult{Entries: l.entries, Truncated: true}, nil
		}
		return ListResult{}, f.pathError(p, err)
	}
	return ListResult{Entries: l.entries}, nil
}

var errListFull = errors.New("listing full")

type lister struct {
	ctx     context.Context
	hidden  bool
	limit   int
	entries []Entry
}

// list appends the entries of dir, descending depth-1 more levels. Only an
// error reading the top directory (top) is returned; deeper ones leave the
// directory listed without its entries.
func (l *lister) list(dir string, depth int, top bool) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	des, err := os.ReadDir(dir) // sorted by name
	if err != nil && (top || len(des) == 0) {
		if top {
			return err
		}
		return nil
	}
	for _, de := range des {
		if !l.hidden && strings.HasPrefix(de.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, de.Name())
		fi, err := de.Info()
		if err != nil {
			continue // vanished since ReadDir
		}
		if len(l.entries) == l.limit {
			return errListFull
		}
		l.entries = append(l.entries, entryOf(p, fi))
		if depth > 1 && fi.IsDir() {
			if err := l.list(p, depth-1, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// MakeDir creates the directory path with the given permission bits
// (0: 0755, less the umask). With parents it also creates missing parents
// and succeeds when the directory exists already, like mkdir -p.
func (f *FS) MakeDir(ctx context.Context, path string, parents bool, mode fs.FileMode) (Entry, error) {
	p, err := f.Resolve(path)
	if err != nil {
		return Entry{}, err
	}
	if mode&^modeBits != 0 {
		return Entry{}, errs.New(errs.Invalid, "mode %#o has bits other than permissions, setuid, setgid and sticky", uint32(mode))
	}
	perm := mode
	if perm == 0 {
		perm = 0o755
	}
	existed := false
	if fi, err := os.Lstat(p); err == nil {
		if !fi.IsDir() {
			return Entry{}, errs.New(errs.Exists, "%s exists and is a %s, not a directory", p, typeOf(fi.Mode()))
		}
		if !parents {
			return Entry{}, errs.New(errs.Exists, "directory %s exists already (set parents to accept an existing directory)", p)
		}
		existed = true
	}
	if !existed {
		if parents {
			err = os.MkdirAll(p, perm.Perm())
		} else {
			err = os.Mkdir(p, perm.Perm())
		}
		if err != nil {
			switch {
			case !parents && errors.Is(err, fs.ErrNotExist):
				return Entry{}, errs.New(errs.NotFound, "parent directory %s does not exist; set parents to create it too", filepath.Dir(p))
			case errors.Is(err, syscall.ENOTDIR), errors.Is(err, fs.ErrExist):
				return Entry{}, errs.New(errs.Precondition, "cannot create %s: a component of the path exists and is not a directory", p)
			}
			return Entry{}, f.pathError(p, err)
		}
		if mode != 0 {
			// An explicit mode is applied exactly, without the umask.
			if err := os.Chmod(p, mode); err != nil {
				return Entry{}, f.pathError(p, err)
			}
		}
	}
	fi, err := f.lstat(p)
	if err != nil {
		return Entry{}, err
	}
	return entryOf(p, fi), nil
}

// Move renames src to dst. dst is the new name: an existing directory at
// dst is not moved into. An existing dst (a file, or an empty directory
// when src is a directory) is replaced only with overwrite. Across file
// systems the tree is copied (modes, times and symlinks kept) and then the
// source removed.
func (f *FS) Move(ctx context.Context, src, dst string, overwrite bool) (Entry, error) {
	s, err := f.Resolve(src)
	if err != nil {
		return Entry{}, fmt.Errorf("source: %w", err)
	}
	d, err := f.Resolve(dst)
	if err != nil {
		return Entry{}, fmt.Errorf("destination: %w", err)
	}
	if s == "/" || d == "/" {
		return Entry{}, errs.New(errs.Invalid, "cannot move / or replace it")
	}
	si, err := os.Lstat(s)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Entry{}, errs.New(errs.NotFound, "source %s does not exist", s)
		}
		return Entry{}, f.pathError(s, err)
	}
	if s == d {
		return entryOf(d, si), nil
	}
	if si.IsDir() && strings.HasPrefix(d, s+string(filepath.Separator)) {
		return Entry{}, errs.New(errs.Invalid, "cannot move directory %s into itself (%s)", s, d)
	}
	parent := filepath.Dir(d)
	if pi, err := os.Stat(parent); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Entry{}, errs.New(errs.NotFound, "destination directory %s does not exist; create it first with MakeDir", parent)
		}
		return Entry{}, f.pathError(parent, err)
	} else if !pi.IsDir() {
		return Entry{}, errs.New(errs.Precondition, "destination parent %s is a %s, not a directory", parent, typeOf(pi.Mode()))
	}
	replace := false
	if di, err := os.Lstat(d); err == nil {
		switch {
		case os.SameFile(si, di):
			// Another name of the same file (a case change on a
			// case-insensitive file system): just rename.
			replace = true
		case !overwrite:
			return Entry{}, errs.New(errs.Exists, "destination %s exists (a %s); set overwrite to replace it, or choose another name", d, typeOf(di.Mode()))
		case di.IsDir() && !si.IsDir():
			return Entry{}, errs.New(errs.Precondition, "cannot replace directory %s with a %s; remove it first", d, typeOf(si.Mode()))
		case !di.IsDir() && si.IsDir():
			return Entry{}, errs.New(errs.Precondition, "cannot replace %s %s with a directory; remove it first", typeOf(di.Mode()), d)
		case di.IsDir():
			if n, _ := countEntries(d); n > 0 {
				return Entry{}, errs.New(errs.Precondition, "cannot replace directory %s: it is not empty (%s); remove it first", d, plural(n, "entry", "entries"))
			}
			replace = true
		default:
			replace = true
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Entry{}, f.pathError(d, err)
	}

	if replace {
		err = renameReplace(s, d)
	} else {
		err = renameNoReplace(s, d)
	}
	if errors.Is(err, syscall.EXDEV) {
		err = f.moveAcross(ctx, s, d, si, replace)
	}
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrExist) && !replace:
			return Entry{}, errs.New(errs.Exists, "destination %s appeared while moving; set overwrite to replace it", d)
		case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, fs.ErrExist):
			return Entry{}, errs.New(errs.Precondition, "cannot replace directory %s: it is not empty; remove it first", d)
		}
		return Entry{}, f.pathError(s, err)
	}
	fi, err := f.lstat(d)
	if err != nil {
		return Entry{}, err
	}
	return entryOf(d, fi), nil
}

// moveAcross moves s to d on another file system: copy to a temporary name
// next to d, rename into place, remove s.
func (f *FS) moveAcross(ctx context.Context, s, d string, si fs.FileInfo, replace bool) error {
	tmp, err := tempName(d)
	if err != nil {
		return err
	}
	if err := copyTree(ctx, s, tmp, si); err != nil {
		os.RemoveAll(tmp)
		var e *errs.Error
		if errors.As(err, &e) {
			return err
		}
		return errs.Wrap(errs.KindOf(err), err, "copy %s to %s (they are on different file systems)", s, d)
	}
	if replace {
		err = renameReplace(tmp, d)
	} else {
		err = renameNoReplace(tmp, d)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.RemoveAll(s); err != nil {
		return errs.Wrap(errs.KindOf(err), err, "copied %s to %s (different file systems), but could not remove the source", s, d)
	}
	return nil
}

// copyTree copies the entry s (described by si) to d, recursively: regular
// files with content, mode and times, directories, and symlinks as links.
func copyTree(ctx context.Context, s, d string, si fs.FileInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch typeOf(si.Mode()) {
	case TypeSymlink:
		target, err := os.Readlink(s)
		if err != nil {
			return err
		}
		return os.Symlink(target, d)
	case TypeFile:
		if err := copyFile(s, d, si); err != nil {
			return err
		}
	case TypeDir:
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		des, err := os.ReadDir(s)
		if err != nil {
			return err
		}
		for _, de := range des {
			fi, err := de.Info()
			if err != nil {
				return err
			}
			if err := copyTree(ctx, filepath.Join(s, de.Name()), filepath.Join(d, de.Name()), fi); err != nil {
				return err
			}
		}
		if err := os.Chmod(d, si.Mode()&modeBits); err != nil {
			return err
		}
	default:
		return errs.New(errs.Precondition, "cannot move %s to another file system: it is a socket, device or named pipe", s)
	}
	return os.Chtimes(d, si.ModTime(), si.ModTime())
}

func copyFile(s, d string, si fs.FileInfo) error {
	in, err := os.Open(s)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(d, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	keepOwner(out, si)
	if err := out.Chmod(si.Mode() & modeBits); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// countEntries returns how many entries the directory dir holds.
func countEntries(dir string) (int, error) {
	d, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(1024)
		n += len(names)
		if err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
	}
}

// Remove deletes path: a file, a symlink (not what it points to), an empty
// directory, or with recursive a directory and everything below it. It
// refuses to remove /, the workspace, the home directory, or a directory
// that contains either.
func (f *FS) Remove(ctx context.Context, path string, recursive bool) error {
	p, err := f.Resolve(path)
	if err != nil {
		return err
	}
	sep := string(filepath.Separator)
	if p == sep {
		return errs.New(errs.Precondition, "refusing to remove /")
	}
	for _, guard := range []struct{ dir, what string }{{f.workspace, "workspace"}, {f.home, "home directory"}} {
		if p == guard.dir {
			return errs.New(errs.Precondition, "refusing to remove the %s %s itself; remove the entries inside it instead", guard.what, p)
		}
		if strings.HasPrefix(guard.dir, p+sep) {
			return errs.New(errs.Precondition, "refusing to remove %s: it contains the %s %s", p, guard.what, guard.dir)
		}
	}
	fi, err := f.lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() || !recursive {
		err := os.Remove(p)
		if err != nil && fi.IsDir() && (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist)) {
			n, _ := countEntries(p)
			return errs.New(errs.Precondition, "directory %s is not empty (%s); set recursive to remove it and everything in it", p, plural(n, "entry", "entries"))
		}
		return f.pathError(p, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		// Name the entry that could not be removed, and say that the
		// removal stopped part way.
		at := p
		var pe *fs.PathError
		if errors.As(err, &pe) && filepath.IsAbs(pe.Path) {
			at = pe.Path
		}
		e := f.pathError(at, err)
		return errs.Wrap(errs.KindOf(e), e, "removing %s stopped part way; entries before it may be gone", p)
	}
	return nil
}
