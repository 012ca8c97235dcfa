package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Basis is what an earlier archive says of a tree that was written from
// it (a restore), so that PutDir can take a file's sha256 without
// reading the file.
type Basis struct {
	// Entries are the earlier archive's entries (only files count).
	Entries []Entry `json:"entries"`
	// Before is an instant after the tree was written from Entries and
	// before anything else could write it (the restore's end, before the
	// sandbox started). A file whose inode last changed (ctime) before
	// it, and whose path, size, mode and modification time (to the
	// second) are an entry's, has that entry's content: any write,
	// truncate, rename, chmod or utime after Before moves the ctime.
	Before time.Time `json:"before"`
}

// DirOptions tunes PutDir.
type DirOptions struct {
	// Basis, when set, lets PutDir skip reading the files it vouches for.
	Basis *Basis
	// Progress, when set, is called with the bytes of file content read
	// so far, after each file (from several goroutines, one at a time).
	Progress func(read int64)
}

// PutDir stores the tree under dir (a directory the hub reads directly:
// a stopped sandbox's workspace volume) as a new archive of org, as Put
// would store the snapshot export of that tree: directories, regular
// files and symlinks with their modes and modification times; devices,
// named pipes and sockets listed in Skipped. The tree must not change
// meanwhile. It never follows a symlink (os.Root): a tree a sandbox
// wrote cannot make the hub read outside it.
//
// Files are read, hashed and uploaded Options.Uploads at a time. A file
// that opts.Basis vouches for is not read when the org has its blob.
// The guarantees are Put's: every blob uploaded is read back, the
// manifest is written last, and a PutDir that did not finish leaves
// only what GC removes.
func (s *Store) PutDir(ctx context.Context, org, label, dir string, opts DirOptions) (*Manifest, error) {
	if err := checkOrg(org); err != nil {
		return nil, err
	}
	if err := checkLabel(label); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errs.Wrap(errs.KindOf(err), err, "open the tree to archive")
	}
	defer root.Close()
	l := s.orgLock(org)
	l.RLock()
	defer l.RUnlock()

	start := s.opts.Now()
	m := &Manifest{Format: manifestFormat, ID: newID(start), Org: org, Label: label, Created: start.UTC()}
	pk := pendingKey(org, m.ID)
	if err := s.bucket.WriteAll(ctx, pk, []byte(start.UTC().Format(time.RFC3339Nano)), nil); err != nil {
		return nil, storeError(err, "write pending marker")
	}
	defer s.removePending(ctx, pk)
	s.hook("started")

	cached, err := m.walk(root)
	if err != nil {
		return nil, err
	}
	d := &dirPut{s: s, root: root, m: m, opts: opts, cached: cached,
		mem: semaphore.NewWeighted(s.opts.MemoryBytes), seen: make(map[string]bool)}
	if opts.Basis != nil {
		d.basis = make(map[string]*Entry, len(opts.Basis.Entries))
		for i := range opts.Basis.Entries {
			if e := &opts.Basis.Entries[i]; e.Type == TypeFile {
				d.basis[e.Path] = e
			}
		}
	}
	if err := d.run(ctx); err != nil {
		return nil, err
	}
	m.NewBytes, m.checked = d.newBytes, d.checked.sums()
	if err := s.commit(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// fileStat is what the walk saw of a file, for the basis check.
type fileStat struct {
	ctime time.Time
}

// walk reads the tree's entries (files without their sha256), in
// fs.WalkDir's order: a directory before what it holds.
func (m *Manifest) walk(root *os.Root) ([]fileStat, error) {
	var stats []fileStat
	err := fs.WalkDir(root.FS(), ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return errs.Wrap(errs.KindOf(err), err, "read the tree to archive")
		}
		if p == "." {
			return nil
		}
		fi, err := de.Info()
		if err != nil {
			return errs.Wrap(errs.KindOf(err), err, "read the tree to archive")
		}
		mode, ctime, ok := statOf(fi)
		if !ok {
			return errs.New(errs.Unknown, "archive %s: no file status", p)
		}
		e := Entry{Path: p, Mode: mode, ModTime: fi.ModTime().UTC()}
		switch fi.Mode().Type() {
		case fs.ModeDir:
			e.Type = TypeDir
		case 0:
			e.Type, e.Size = TypeFile, fi.Size()
		case fs.ModeSymlink:
			t, err := root.Readlink(p)
			if err != nil {
				return errs.Wrap(errs.KindOf(err), err, "read symlink %s", p)
			}
			if t == "" {
				return errs.New(errs.Invalid, "symlink %q has an empty target", p)
			}
			e.Type, e.Target = TypeSymlink, t
		case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
			m.Skipped = append(m.Skipped, p+": device")
			return nil
		case fs.ModeNamedPipe:
			m.Skipped = append(m.Skipped, p+": named pipe")
			return nil
		default:
			m.Skipped = append(m.Skipped, p+": socket or other special file")
			return nil
		}
		m.Entries = append(m.Entries, e)
		stats = append(stats, fileStat{ctime: ctime})
		m.count(e, 1)
		if len(m.Entries) > MaxEntries {
			return errs.New(errs.Exhausted, "the archive has more than %d entries", MaxEntries)
		}
		return nil
	})
	return stats, err
}

// dirPut is one PutDir's hashing and uploading.
type dirPut struct {
	s      *Store
	root   *os.Root
	m      *Manifest
	opts   DirOptions
	cached []fileStat // by entry index
	basis  map[string]*Entry
	mem    *semaphore.Weighted

	checked sumSet
	mu      sync.Mutex
	seen    map[string]bool // blobs of this archive, stored or being stored
	read    int64
	// newBytes is what was uploaded.
	newBytes int64
}

// run fills in every file's sha256 and stores the blobs the org lacks.
func (d *dirPut) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range d.s.opts.Uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := d.file(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for i := range d.m.Entries {
		if d.m.Entries[i].Type != TypeFile {
			continue
		}
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// vouched returns the sha256 the basis gives entry i, or "".
func (d *dirPut) vouched(i int) string {
	e := &d.m.Entries[i]
	b := d.basis[e.Path]
	if b == nil || b.Size != e.Size || b.Mode != e.Mode || b.ModTime.Unix() != e.ModTime.Unix() ||
		!d.cached[i].ctime.Before(d.opts.Basis.Before) || !hexRE.MatchString(b.SHA256) {
		return ""
	}
	return b.SHA256
}

// file makes sure the org has entry i's content, and sets its sha256.
func (d *dirPut) file(ctx context.Context, i int) error {
	e := &d.m.Entries[i]
	if sum := d.vouched(i); sum != "" {
		key := blobKey(d.m.Org, sum)
		a, err := d.s.bucket.Attributes(ctx, key)
		if err == nil && a.Size == e.Size {
			e.SHA256 = sum // VerifyRest reads it back
			return nil
		}
		// No such blob (collected since): read the file after all.
	}
	j, err := d.readFile(ctx, e)
	if err != nil {
		return err
	}
	e.SHA256 = j.sum
	d.mu.Lock()
	dup := d.seen[j.sum]
	d.seen[j.sum] = true
	d.mu.Unlock()
	if dup {
		d.release(&j)
		return nil
	}
	n, err := d.s.storeBlob(ctx, d.m.Org, &j, &d.checked)
	d.release(&j)
	d.mu.Lock()
	d.newBytes += n
	d.mu.Unlock()
	return err
}

func (d *dirPut) release(j *job) {
	if j.file != nil {
		j.file.Close()
	} else {
		d.mem.Release(j.size)
	}
}

// readFile reads and hashes a file: small ones into memory, large ones
// left open (uploaded from the file, if at all).
func (d *dirPut) readFile(ctx context.Context, e *Entry) (job, error) {
	j := job{size: e.Size}
	f, err := d.root.OpenFile(e.Path, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return j, errs.Wrap(errs.KindOf(err), err, "archive %s", e.Path)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
		f.Close()
		return j, errs.Wrap(errs.Precondition, ErrChanged, "file %q changed while it was archived", e.Path)
	}
	h := sha256.New()
	var n int64
	if e.Size <= d.s.opts.MemoryBytes/4 {
		defer f.Close()
		if err := d.mem.Acquire(ctx, e.Size); err != nil {
			return j, err
		}
		j.data = make([]byte, e.Size)
		var k int
		k, err = io.ReadFull(f, j.data)
		n = int64(k)
		h.Write(j.data[:k])
		if err != nil {
			d.mem.Release(e.Size)
		}
	} else {
		n, err = copyBuf(h, io.LimitReader(f, e.Size))
		if err != nil {
			f.Close()
		} else {
			j.file = f
		}
	}
	if err == nil && n != e.Size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return j, errs.Wrap(errs.Precondition, ErrChanged, "file %q changed while it was archived (shorter)", e.Path)
		}
		return j, errs.Wrap(errs.KindOf(err), err, "read %s", e.Path)
	}
	j.sum = hex.EncodeToString(h.Sum(nil))
	d.mu.Lock()
	d.read += n
	read := d.read
	if d.opts.Progress != nil {
		d.opts.Progress(read)
	}
	d.mu.Unlock()
	return j, nil
}
