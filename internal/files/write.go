package files

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/devdepot-ai/agentd/internal/durable"
	"github.com/devdepot-ai/agentd/internal/errs"
)

// Absent is the ExpectedSHA256 that means "the file must not exist yet":
// a write with it creates a file and never replaces one.
const Absent = "absent"

// maxSymlinkHops is how many symlinks a write follows before giving up,
// as the kernel does (ELOOP).
const maxSymlinkHops = 40

// WriteOptions says how Write writes.
type WriteOptions struct {
	// Mode is the permission bits of the file (with fs.ModeSetuid,
	// fs.ModeSetgid, fs.ModeSticky allowed). 0 keeps an existing file's
	// mode and gives a new file 0644 (the umask does not apply).
	Mode fs.FileMode
	// CreateParents creates missing parent directories.
	CreateParents bool
	// Append adds the content after the existing content instead of
	// replacing it. The append is atomic too: the file is copied, extended
	// and renamed into place.
	Append bool
	// ExpectedSHA256, if set, is the hex sha256 the file must have now, or
	// Absent when it must not exist. Otherwise the write fails with
	// errs.Precondition and changes nothing.
	ExpectedSHA256 string
}

// WriteResult describes the file after a write.
type WriteResult struct {
	Path    string // absolute path written (as asked: a symlink's name, not its target)
	Size    int64  // size of the file after the write
	SHA256  string // hex sha256 of the whole file after the write
	Created bool   // the file did not exist before
}

// Write replaces (or with Append extends) the file at path with the
// content of r, atomically: the content goes to a temporary file in the
// same directory, which is synced and renamed over the file. If anything
// fails — r returns an error, ctx ends, the disk fills up — the temporary
// file is removed and the file is untouched. Writing through a symlink
// writes the file it points to and leaves the link in place. An existing
// file keeps its mode and, where the OS allows, its owner and group; hard
// links to it and extended attributes are not carried over.
func (f *FS) Write(ctx context.Context, path string, opts WriteOptions, r io.Reader) (WriteResult, error) {
	p, err := f.Resolve(path)
	if err != nil {
		return WriteResult{}, err
	}
	if opts.Mode&^modeBits != 0 {
		return WriteResult{}, errs.New(errs.Invalid, "mode %#o has bits other than permissions, setuid, setgid and sticky", uint32(opts.Mode))
	}
	expected, err := checkExpected(opts.ExpectedSHA256)
	if err != nil {
		return WriteResult{}, err
	}
	target, fi, err := f.followLinks(p)
	if err != nil {
		return WriteResult{}, err
	}
	if fi != nil {
		if err := f.checkWritableFile(target, fi); err != nil {
			return WriteResult{}, err
		}
	}
	if err := f.checkExpectedContent(target, fi, expected); err != nil {
		return WriteResult{}, err
	}

	dir := filepath.Dir(target)
	created, err := f.ensureDir(dir, opts.CreateParents)
	if err != nil {
		return WriteResult{}, err
	}
	ok := false
	defer func() {
		if !ok {
			removeCreated(created)
		}
	}()

	tmp, err := f.createTemp(target)
	if err != nil {
		return WriteResult{}, err
	}
	defer tmp.abort()

	if opts.Append && fi != nil {
		if err := tmp.copyFrom(ctx, target); err != nil {
			return WriteResult{}, err
		}
	}
	if err := tmp.receive(ctx, r); err != nil {
		return WriteResult{}, err
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
		if fi != nil {
			mode = fi.Mode() & modeBits
		}
	}
	// With an expectation or an append, the file we checked or copied
	// must be the one we replace; otherwise the last writer wins.
	guard := fi != nil && (expected != "" || opts.Append)
	noReplace := fi == nil && (expected == Absent || opts.Append)
	if err := tmp.commit(mode, fi, guard, noReplace); err != nil {
		return WriteResult{}, err
	}
	ok = true
	return WriteResult{Path: p, Size: tmp.size, SHA256: tmp.sum(), Created: fi == nil}, nil
}

// checkExpected validates an ExpectedSHA256 value and normalises it.
func checkExpected(s string) (string, error) {
	if s == "" || s == Absent {
		return s, nil
	}
	s = strings.ToLower(strings.TrimSpace(s))
	if _, err := hex.DecodeString(s); err != nil || len(s) != 2*sha256.Size {
		return "", errs.New(errs.Invalid, "expected_sha256 %q is not a hex sha256 (64 hex digits) nor %q", shorten(s, 80), Absent)
	}
	return s, nil
}

// checkExpectedContent fails with errs.Precondition unless the file at
// target (fi is nil when it does not exist) matches expected.
func (f *FS) checkExpectedContent(target string, fi fs.FileInfo, expected string) error {
	switch {
	case expected == "":
		return nil
	case expected == Absent && fi == nil:
		return nil
	case expected == Absent:
		sum, err := f.hashFile(target)
		if err != nil {
			return err
		}
		return errs.New(errs.Precondition, "%s exists (sha256 %s) but expected_sha256 says it must be absent; read it first, or pass its sha256 to replace it", target, sum)
	case fi == nil:
		return errs.New(errs.Precondition, "%s does not exist, but expected_sha256 %s was given; use %q to create a new file", target, expected, Absent)
	}
	sum, err := f.hashFile(target)
	if err != nil {
		return err
	}
	if sum != expected {
		return errs.New(errs.Precondition, "%s has changed: its sha256 is %s, not the expected %s; read it again before changing it", target, sum, expected)
	}
	return nil
}

// checkWritableFile fails unless fi, the file at target, is a regular file
// the user may write.
func (f *FS) checkWritableFile(target string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return errs.New(errs.Precondition, "%s is a directory; give the path of a file", target)
	case !fi.Mode().IsRegular():
		return errs.New(errs.Precondition, "%s is a %s (socket, device or named pipe); only regular files can be written", target, typeOf(fi.Mode()))
	case !writable(target):
		// The rename would bypass the file's permissions: refuse as a
		// shell's > would.
		return errs.New(errs.Permission, "permission denied: %s is not writable (mode %#o, agentd runs as user %s)", target, uint32(fi.Mode().Perm()), f.user)
	}
	return nil
}

// followLinks follows symlinks from p to the file they end at. It returns
// that path and its description, or nil when it does not exist (a dangling
// link makes the write create its target, as a shell's > does).
func (f *FS) followLinks(p string) (string, fs.FileInfo, error) {
	cur := p
	for range maxSymlinkHops {
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return cur, nil, nil
		}
		if err != nil {
			return "", nil, f.pathError(cur, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return cur, fi, nil
		}
		t, err := os.Readlink(cur)
		if err != nil {
			return "", nil, f.pathError(cur, err)
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(cur), t)
		}
		cur = filepath.Clean(t)
	}
	return "", nil, errs.New(errs.Precondition, "%s: too many levels of symbolic links", p)
}

// ensureDir makes sure dir exists, creating it and its missing parents if
// create is set. It returns the directories it created, deepest last.
func (f *FS) ensureDir(dir string, create bool) ([]string, error) {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return nil, errs.New(errs.Precondition, "%s is a %s, not a directory", dir, typeOf(fi.Mode()))
		}
		return nil, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, f.pathError(dir, err)
	}
	if !create {
		return nil, errs.New(errs.NotFound, "directory %s does not exist; set create_parents to create it", dir)
	}
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append([]string{d}, missing...)
	}
	for i, d := range missing {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			removeCreated(missing[:i])
			if errors.Is(err, syscall.ENOTDIR) {
				return nil, errs.New(errs.Precondition, "cannot create directory %s: a component of the path is a file", d)
			}
			return nil, f.pathError(d, err)
		}
	}
	return missing, nil
}

// removeCreated removes the directories ensureDir created, deepest first,
// as long as they are empty.
func removeCreated(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		if os.Remove(dirs[i]) != nil {
			return
		}
	}
}

// hashFile returns the hex sha256 of the file at path.
func (f *FS) hashFile(path string) (string, error) {
	in, err := os.Open(path)
	if err != nil {
		return "", f.pathError(path, err)
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return "", f.pathError(path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tempName returns an unused-looking name for a temporary file next to
// path: hidden, marked as agentd's, random.
func tempName(path string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	base := shorten(filepath.Base(path), 200)
	return filepath.Join(filepath.Dir(path), "."+base+".agentd-"+hex.EncodeToString(b[:])+".tmp"), nil
}

// tempFile is content on its way to replacing target.
type tempFile struct {
	fs     *FS
	target string
	name   string
	f      *os.File
	h      *hasher
	size   int64
	queued int64 // bytes handed to startWriteback so far
	done   bool
}

// writebackChunk is how much written content startWriteback is handed at a
// time. Small enough that the final fsync finds little left to write;
// sizes from 1 to 16 MiB did equally well (docs/performance-history.md).
const writebackChunk = 8 << 20

func (f *FS) createTemp(target string) (*tempFile, error) {
	for range 10 {
		name, err := tempName(target)
		if err != nil {
			return nil, err
		}
		file, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			dir := filepath.Dir(target)
			if errors.Is(err, fs.ErrPermission) {
				return nil, errs.New(errs.Permission, "permission denied: cannot create a temporary file in %s to write %s atomically; the directory must be writable by user %s", dir, target, f.user)
			}
			return nil, f.pathError(dir, err)
		}
		return &tempFile{fs: f, target: target, name: name, f: file, h: newHasher()}, nil
	}
	return nil, errs.New(errs.Unknown, "cannot find a free temporary file name next to %s", target)
}

// abort removes the temporary file unless commit succeeded.
func (t *tempFile) abort() {
	t.h.stop()
	if t.done {
		return
	}
	t.f.Close()
	os.Remove(t.name)
}

// writeErr classifies an error writing the temporary file.
func (t *tempFile) writeErr(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return errs.Wrap(errs.Exhausted, err, "no space left on the device holding %s; nothing was written and the file is unchanged", t.target)
	case errors.Is(err, syscall.EDQUOT):
		return errs.Wrap(errs.Exhausted, err, "disk quota exceeded writing %s; nothing was written and the file is unchanged", t.target)
	case errors.Is(err, syscall.EFBIG):
		return errs.Wrap(errs.Exhausted, err, "%s would be larger than the file system allows; the file is unchanged", t.target)
	}
	return t.fs.pathError(t.target, err)
}

func (t *tempFile) Write(p []byte) (int, error) { return t.write(p, false) }

// write writes p to the file and hashes it; with keep, the hasher may
// hold on to p instead of copying it.
func (t *tempFile) write(p []byte, keep bool) (int, error) {
	n, err := t.f.Write(p)
	t.h.write(p[:n], keep && n == len(p))
	t.size += int64(n)
	if err != nil {
		return n, t.writeErr(err)
	}
	if t.size-t.queued >= writebackChunk {
		startWriteback(t.f, t.queued, t.size-t.queued)
		t.queued = t.size
	}
	return n, nil
}

// copyFrom copies the current content of path into the temporary file.
func (t *tempFile) copyFrom(ctx context.Context, path string) error {
	in, err := os.Open(path)
	if err != nil {
		return t.fs.pathError(path, err)
	}
	defer in.Close()
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := t.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return t.fs.pathError(path, rerr)
		}
	}
}

// ChunkReader is a source of content that hands over each chunk for good:
// Write keeps it (for hashing) without a copy, so a chunk must not be
// changed once returned. A gRPC stream's received messages are such chunks.
type ChunkReader interface {
	// ReadChunk returns the next chunk; io.EOF at the end.
	ReadChunk() ([]byte, error)
}

// receive copies r into the temporary file until r ends or ctx is done.
func (t *tempFile) receive(ctx context.Context, r io.Reader) error {
	cr, chunked := r.(ChunkReader)
	var buf []byte
	if !chunked {
		buf = make([]byte, 256<<10)
	}
	for {
		if err := ctx.Err(); err != nil {
			return errs.Wrap(errs.KindOf(err), err, "writing %s: stopped before the content was complete; the file is unchanged", t.target)
		}
		var rerr error
		if chunked {
			var chunk []byte
			chunk, rerr = cr.ReadChunk()
			if len(chunk) > 0 {
				if _, err := t.write(chunk, true); err != nil {
					return err
				}
			}
		} else {
			var n int
			n, rerr = r.Read(buf)
			if n > 0 {
				if _, err := t.write(buf[:n], false); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			var e *errs.Error
			if errors.As(rerr, &e) {
				return rerr
			}
			return errs.Wrap(errs.KindOf(rerr), rerr, "receiving the content of %s failed; the file is unchanged", t.target)
		}
	}
}

func (t *tempFile) sum() string { return t.h.Sum() }

// commit gives the temporary file its mode (and the owner of old, the file
// it replaces, if any), syncs it and renames it over the target. With
// guard, it first checks that the target is still the file old describes;
// with noReplace, it fails if the target has appeared meanwhile.
func (t *tempFile) commit(mode fs.FileMode, old fs.FileInfo, guard, noReplace bool) error {
	if old != nil {
		keepOwner(t.f, old) // before chmod: chown clears setuid and setgid
	}
	if err := t.f.Chmod(mode); err != nil {
		return t.fs.pathError(t.target, err)
	}
	if err := t.f.Sync(); err != nil {
		return t.writeErr(err)
	}
	if err := t.f.Close(); err != nil {
		return t.writeErr(err)
	}
	if guard {
		now, err := os.Lstat(t.target)
		if err != nil || !sameFile(old, now) {
			return errs.New(errs.Precondition, "%s changed while it was being written; nothing was written, read it again and retry", t.target)
		}
	}
	var err error
	if noReplace {
		err = renameNoReplace(t.name, t.target)
	} else {
		var held io.Closer
		if old != nil && old.Mode().IsRegular() && old.Size() >= releaseLater {
			held = holdOld(t.target)
		}
		err = os.Rename(t.name, t.target)
		if held != nil {
			t.fs.background.Go(func() { held.Close() })
		}
	}
	if err != nil {
		if noReplace && errors.Is(err, fs.ErrExist) {
			return errs.New(errs.Precondition, "%s was created by someone else while it was being written; nothing was written, read it and retry", t.target)
		}
		return t.fs.pathError(t.target, err)
	}
	t.done = true
	// The file is in place; a directory that cannot be synced does not
	// undo that, so it does not fail the write.
	_ = durable.SyncDir(filepath.Dir(t.target))
	return nil
}

// releaseLater is the size from which the file a write replaces is freed
// after the write returns (see holdOld).
const releaseLater = 1 << 20

var _ io.Writer = (*tempFile)(nil)
