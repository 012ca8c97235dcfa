package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// tmpPrefix starts the names of the temporary files Restore writes next
// to their targets.
const tmpPrefix = ".agentd-restore-"

// Restore writes snapshot id into target (an absolute path; empty: the
// snapshot's root), creating it if needed. Every file and symlink is
// replaced atomically (written to a temporary name in its directory, then
// renamed); files already identical are left alone (their mode corrected).
// Modes, modification times, symlinks and empty directories come back. A
// path in the way of a different type (a file where the snapshot has a
// directory, say) is replaced. With deleteExtra, paths below target that
// the snapshot does not have are removed, except those the snapshot's
// excludes match or that it skipped, and the daemon's own directories.
// progress, if not nil, is called on the calling goroutine.
func (s *Store) Restore(ctx context.Context, id, target string, deleteExtra bool, progress func(Progress)) (*RestoreSummary, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	o := s.readOp()
	defer o.end(true)
	h, entries, err := s.pinSnapshot(id, o)
	if err != nil {
		return nil, err
	}
	if err := validateEntries(entries); err != nil {
		return nil, corrupt(id, err)
	}
	if target == "" {
		target = h.Snapshot.Root
	}
	if !filepath.IsAbs(target) {
		return nil, errs.New(errs.Invalid, "restore target %q is not an absolute path", target)
	}
	target = filepath.Clean(target)
	if within(target, s.dir) {
		return nil, errs.New(errs.Invalid, "restore target %s is inside the snapshot store", target)
	}
	fi, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(target, 0o755); err != nil {
			return nil, errs.Wrap(errs.KindOf(err), err, "create restore target")
		}
	case err != nil:
		return nil, errs.Wrap(errs.KindOf(err), err, "restore target")
	case !fi.IsDir():
		return nil, errs.New(errs.Precondition, "restore target %s is a file, not a directory", target)
	}

	sum := &RestoreSummary{Target: target}
	var pr Progress
	var files, links []int
	for i := range entries {
		switch entries[i].Type {
		case TypeFile:
			files = append(files, i)
			pr.BytesTotal += entries[i].Size
		case TypeSymlink:
			links = append(links, i)
		}
	}
	pr.FilesTotal = int64(len(files) + len(links))
	progress(pr)
	fail := func(err error) (*RestoreSummary, error) {
		return nil, errs.Wrap(errs.KindOf(err), err, "restore of %s into %s stopped after %d of %d files", id, target, pr.FilesDone, pr.FilesTotal)
	}

	// Directories first, writable for now; their modes and times are set last.
	for i := range entries {
		if entries[i].Type == TypeDir {
			if err := ensureDir(s.join(target, entries[i].Path)); err != nil {
				return fail(err)
			}
		}
	}

	wrote := make([]bool, len(entries))
	err = s.parallel(ctx, len(files), func(ctx context.Context, sc *scratch, k int) error {
		i := files[k]
		w, err := s.restoreFile(&entries[i], s.join(target, entries[i].Path), sc)
		wrote[i] = w
		return err
	}, func(k int) {
		i := files[k]
		if wrote[i] {
			sum.FilesWritten++
		} else {
			sum.FilesUnchanged++
		}
		pr.FilesDone++
		pr.BytesDone += entries[i].Size
		progress(pr)
	})
	if err != nil {
		return fail(err)
	}
	for _, i := range links {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		w, err := restoreLink(&entries[i], s.join(target, entries[i].Path))
		if err != nil {
			return fail(err)
		}
		if w {
			sum.FilesWritten++
		} else {
			sum.FilesUnchanged++
		}
		pr.FilesDone++
		progress(pr)
	}

	if deleteExtra {
		excl, _ := newExcluder(h.Snapshot.Excludes) // validated when the snapshot was taken
		d := &deleter{s: s, excl: excl, want: make(map[string]Type, len(entries)), skipped: make(map[string]bool)}
		for i := range entries {
			d.want[entries[i].Path] = entries[i].Type
		}
		for _, sk := range h.Snapshot.Skipped {
			d.skipped[sk.Path] = true
		}
		if err := d.dir(ctx, target, ""); err != nil {
			return fail(err)
		}
		sum.PathsRemoved = d.removed
	}

	// Deepest first, so setting a directory's time is not undone by
	// changes inside it and a read-only directory is finished last.
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if e.Type != TypeDir {
			continue
		}
		p := s.join(target, e.Path)
		if err := os.Chmod(p, e.FileMode()); err != nil {
			return fail(err)
		}
		if !e.ModTime.IsZero() {
			_ = os.Chtimes(p, e.ModTime, e.ModTime)
		}
	}
	return sum, nil
}

// join returns the native path of rel below root.
func (s *Store) join(root, rel string) string {
	return root + string(filepath.Separator) + filepath.FromSlash(rel)
}

// ensureDir makes p a directory the owner can write, replacing a file or
// symlink in its way.
func ensureDir(p string) error {
	fi, err := os.Lstat(p)
	switch {
	case err == nil && fi.IsDir():
		if fi.Mode().Perm()&0o700 != 0o700 {
			return os.Chmod(p, fi.Mode()|0o700)
		}
		return nil
	case err == nil:
		if err := os.Remove(p); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return os.Mkdir(p, 0o700)
}

// restoreFile makes p hold file e. It returns false if p was identical
// already (then only its mode is corrected).
func (s *Store) restoreFile(e *Entry, p string, sc *scratch) (bool, error) {
	fi, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err == nil && fi.Mode().IsRegular() && fi.Size() == e.Size && s.sameContent(e, p, fi, sc) {
		if unixMode(fi.Mode()) != e.Mode {
			if err := os.Chmod(p, e.FileMode()); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	f, err := os.CreateTemp(filepath.Dir(p), tmpPrefix+"*")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := s.copyBlob(f, e.SHA256, e.Size, sc); err != nil {
		return false, err
	}
	if err := f.Chmod(e.FileMode()); err != nil {
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if !e.ModTime.IsZero() {
		if err := os.Chtimes(tmp, e.ModTime, e.ModTime); err != nil {
			return false, err
		}
	}
	if fi != nil && fi.IsDir() {
		if err := os.RemoveAll(p); err != nil {
			return false, err
		}
	}
	if err := os.Rename(tmp, p); err != nil {
		return false, err
	}
	ok = true
	return true, nil
}

// sameContent reports whether the regular file p (described by fi, of
// e's size) holds e's content: without reading it when it is the very
// file the snapshot read and has not changed since, else by hashing it.
func (s *Store) sameContent(e *Entry, p string, fi fs.FileInfo, sc *scratch) bool {
	st := stampOf(fi)
	if !e.stamp.racy && e.stamp.ino != 0 && st.ino == e.stamp.ino && st.dev == e.stamp.dev &&
		st.ctime == e.stamp.ctime && fi.ModTime().Equal(e.ModTime) {
		return true
	}
	f, err := s.opts.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	h, n, err := hashReader(f, sc.io)
	return err == nil && n == e.Size && h == e.SHA256
}

// restoreLink makes p the symlink e. It returns false if it was already.
func restoreLink(e *Entry, p string) (bool, error) {
	fi, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := os.Readlink(p); err == nil && t == e.Target {
			return false, nil
		}
	}
	tmp := filepath.Join(filepath.Dir(p), tmpPrefix+randomSuffix())
	if err := os.Symlink(e.Target, tmp); err != nil {
		return false, err
	}
	if fi != nil && fi.IsDir() {
		if err := os.RemoveAll(p); err != nil {
			os.Remove(tmp)
			return false, err
		}
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return false, err
	}
	return true, nil
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// deleter removes what a restore target has and the snapshot has not.
type deleter struct {
	s       *Store
	excl    *excluder
	want    map[string]Type
	skipped map[string]bool
	removed int64
}

func (d *deleter) dir(ctx context.Context, abs, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(abs)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		childAbs := abs + string(filepath.Separator) + name
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		if d.s.protected(childAbs) || d.kept(childRel) {
			continue
		}
		fi, err := os.Lstat(childAbs)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if d.excl.match(childRel, name, fi.IsDir()) {
			continue
		}
		t, ok := d.want[childRel]
		if ok && t == TypeDir && fi.IsDir() {
			if err := d.dir(ctx, childAbs, childRel); err != nil {
				return err
			}
			continue
		}
		if ok {
			continue // restored just now
		}
		n, err := removeCounting(childAbs, fi)
		d.removed += n
		if err != nil {
			return err
		}
	}
	return nil
}

// kept reports whether rel is, or lies below, a path the snapshot skipped
// (an unreadable directory, say): its absence from the snapshot does not
// mean it should go.
func (d *deleter) kept(rel string) bool {
	for p := rel; ; {
		if d.skipped[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// removeCounting removes p and everything below it, returning how many
// paths went.
func removeCounting(p string, fi fs.FileInfo) (int64, error) {
	if !fi.IsDir() {
		if err := os.Remove(p); err != nil {
			return 0, err
		}
		return 1, nil
	}
	var n int64
	_ = filepath.WalkDir(p, func(string, fs.DirEntry, error) error {
		n++
		return nil
	})
	if err := os.RemoveAll(p); err != nil {
		return 0, err
	}
	return n, nil
}
