package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/semaphore"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/tarcheck"
)

// MaxEntries bounds the entries of one archive.
const MaxEntries = 1_000_000

// Put reads r, a tar stream in the snapshot export format (directories,
// regular files, symlinks; hard links to earlier files are kept as
// copies), and stores it as a new archive of org.
//
// Every file's content goes to the blob named by its sha256, unless the
// org has that blob already; every blob Put uploads is read back and its
// sha256 checked. The manifest is written last: Put returns the manifest
// only when the archive is complete, and an archive that Put did not
// finish (an error, a cancelled ctx, a crash) has no manifest, no id
// that List shows, and leaves only blobs that GC removes.
//
// A bad stream (not a tar, truncated, a path that is absolute or climbs
// out with "..") is refused with an errs.Invalid error, and no archive
// is made.
func (s *Store) Put(ctx context.Context, org, label string, r io.Reader) (*Manifest, error) {
	if err := checkOrg(org); err != nil {
		return nil, err
	}
	if err := checkLabel(label); err != nil {
		return nil, err
	}
	l := s.orgLock(org)
	l.RLock()
	defer l.RUnlock()

	start := s.opts.Now()
	id := newID(start)
	pk := pendingKey(org, id)
	if err := s.bucket.WriteAll(ctx, pk, []byte(start.UTC().Format(time.RFC3339Nano)), nil); err != nil {
		return nil, storeError(err, "write pending marker")
	}
	defer s.removePending(ctx, pk)
	s.hook("started")

	m := &Manifest{Format: manifestFormat, ID: id, Org: org, Label: label, Created: start.UTC()}
	up := s.newUploader(ctx, org)
	err := s.readStream(up.ctx, r, m, up)
	if uerr := up.wait(); err == nil || (errors.Is(err, context.Canceled) && uerr != nil) {
		err = uerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	m.NewBytes = up.newBytes
	m.checked = up.checked.sums()
	if err := s.commit(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

func (s *Store) hook(point string) {
	if s.opts.hook != nil {
		s.opts.hook(point)
	}
}

// readStream reads the tar stream into m, handing file contents to up.
func (s *Store) readStream(ctx context.Context, r io.Reader, m *Manifest, up *uploader) error {
	byPath := make(map[string]int)
	tail := tarcheck.NewReader(r)
	tr := tar.NewReader(tail)
	headers := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			if !tail.Complete() {
				// archive/tar takes a stream that stops between two
				// entries as complete; a cut tunnel must not pass for
				// an archive with fewer files.
				return errs.New(errs.Invalid, "the archive stream ends without the tar's end marker (truncated after %d entries?)", headers)
			}
			// Read the record padding a tar writer may add after the
			// end, so that a producer writing into a pipe finishes.
			if _, err := io.Copy(io.Discard, io.LimitReader(r, 1<<20)); err != nil {
				return tarError(err)
			}
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // judged below, with a clearer message
		}
		if err != nil {
			if headers == 0 && errors.Is(err, io.ErrUnexpectedEOF) {
				err = tar.ErrHeader
			}
			return tarError(err)
		}
		headers++
		rel, err := tarcheck.RelPath(hdr.Name)
		if err != nil {
			return err
		}
		if rel == "" {
			continue
		}
		e := Entry{Path: rel, Mode: uint32(hdr.Mode) & 0o7777, ModTime: hdr.ModTime.UTC()}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Type = TypeDir
		case tar.TypeReg, '\x00':
			if hdr.Size < 0 {
				return errs.New(errs.Invalid, "entry %q has a negative size", hdr.Name)
			}
			sum, err := up.file(tr, hdr.Size)
			if err != nil {
				return err
			}
			e.Type, e.SHA256, e.Size = TypeFile, sum, hdr.Size
		case tar.TypeSymlink:
			if hdr.Linkname == "" {
				return errs.New(errs.Invalid, "symlink %q has an empty target", hdr.Name)
			}
			e.Type, e.Target = TypeSymlink, hdr.Linkname
		case tar.TypeLink:
			t, err := tarcheck.RelPath(hdr.Linkname)
			i, ok := byPath[t]
			if err != nil || !ok || m.Entries[i].Type != TypeFile {
				return errs.New(errs.Invalid, "hard link %q points to %q, which is not an earlier file of the archive", hdr.Name, hdr.Linkname)
			}
			src := m.Entries[i]
			e.Type, e.SHA256, e.Size = TypeFile, src.SHA256, src.Size
		case tar.TypeChar, tar.TypeBlock:
			m.Skipped = append(m.Skipped, rel+": device")
			continue
		case tar.TypeFifo:
			m.Skipped = append(m.Skipped, rel+": named pipe")
			continue
		default:
			m.Skipped = append(m.Skipped, fmt.Sprintf("%s: unsupported tar entry type %q", rel, hdr.Typeflag))
			continue
		}
		if i, ok := byPath[rel]; ok { // a later entry of the same path wins, as tar -x has it
			m.count(m.Entries[i], -1)
			m.Entries[i] = e
		} else {
			byPath[rel] = len(m.Entries)
			m.Entries = append(m.Entries, e)
		}
		m.count(e, 1)
		if len(m.Entries) > MaxEntries {
			return errs.New(errs.Exhausted, "the archive has more than %d entries", MaxEntries)
		}
	}
	return nil
}

func (m *Manifest) count(e Entry, d int64) {
	switch e.Type {
	case TypeDir:
		m.Dirs += d
	case TypeFile:
		m.Files += d
		m.TotalBytes += d * e.Size
	case TypeSymlink:
		m.Symlinks += d
	}
}

// uploader stores the file contents readStream hands it, several at a
// time, holding at most Options.MemoryBytes of them in memory.
type uploader struct {
	s      *Store
	org    string
	ctx    context.Context
	cancel context.CancelFunc
	jobs   chan job
	wg     sync.WaitGroup
	mem    *semaphore.Weighted
	small  int64
	seen   map[string]bool // blobs of this archive, handed to a worker already
	// checked holds the blobs uploaded and read back by this Put.
	checked sumSet

	mu       sync.Mutex
	err      error
	newBytes int64
}

// job is one blob to store: its content in data, or in file (a
// temporary file, already unlinked).
type job struct {
	sum  string
	size int64
	data []byte
	file *os.File
}

func (s *Store) newUploader(ctx context.Context, org string) *uploader {
	ctx, cancel := context.WithCancel(ctx)
	u := &uploader{
		s: s, org: org, ctx: ctx, cancel: cancel,
		jobs:  make(chan job),
		mem:   semaphore.NewWeighted(s.opts.MemoryBytes),
		small: s.opts.MemoryBytes / 4,
		seen:  make(map[string]bool),
	}
	for range s.opts.Uploads {
		u.wg.Add(1)
		go u.work()
	}
	return u
}

// file reads one file's content of size n from r, hashes it and hands it
// to a worker; it returns the sha256.
func (u *uploader) file(r io.Reader, n int64) (string, error) {
	var j job
	j.size = n
	if n <= u.small {
		if err := u.mem.Acquire(u.ctx, n); err != nil {
			return "", err
		}
		j.data = make([]byte, n)
		if _, err := io.ReadFull(r, j.data); err != nil {
			u.mem.Release(n)
			return "", tarError(err)
		}
		h := sha256.Sum256(j.data)
		j.sum = hex.EncodeToString(h[:])
	} else {
		f, err := os.CreateTemp(u.s.opts.TempDir, "agenthub-archive-*")
		if err != nil {
			return "", errs.Wrap(errs.KindOf(err), err, "temporary file for a large file")
		}
		os.Remove(f.Name()) // gone with the process, whatever happens
		h := sha256.New()
		if _, err := io.CopyN(io.MultiWriter(f, h), r, n); err != nil {
			f.Close()
			if errs.KindOf(err) != errs.Unknown && !errors.Is(err, io.EOF) {
				return "", errs.Wrap(errs.KindOf(err), err, "temporary file for a large file")
			}
			return "", tarError(err)
		}
		j.file, j.sum = f, hex.EncodeToString(h.Sum(nil))
	}
	if u.seen[j.sum] {
		j.release(u)
		return j.sum, nil
	}
	u.seen[j.sum] = true
	select {
	case u.jobs <- j:
		return j.sum, nil
	case <-u.ctx.Done():
		j.release(u)
		return "", u.ctx.Err()
	}
}

func (j *job) release(u *uploader) {
	if j.file != nil {
		j.file.Close()
	} else {
		u.mem.Release(j.size)
	}
}

func (j *job) reader() (io.Reader, error) {
	if j.file == nil {
		return bytes.NewReader(j.data), nil
	}
	if _, err := j.file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.LimitReader(j.file, j.size), nil
}

func (u *uploader) work() {
	defer u.wg.Done()
	for j := range u.jobs {
		if u.ctx.Err() == nil {
			n, err := u.s.storeBlob(u.ctx, u.org, &j, &u.checked)
			u.mu.Lock()
			u.newBytes += n
			if err != nil && u.err == nil {
				u.err = err
				u.cancel()
			}
			u.mu.Unlock()
		}
		j.release(u)
	}
}

// wait ends the uploads and returns the first error of a worker.
func (u *uploader) wait() error {
	close(u.jobs)
	u.wg.Wait()
	u.cancel()
	return u.err
}

// storeBlob uploads a blob unless the org has it, reads it back and
// checks it (adding it to checked); it returns the bytes it uploaded.
func (s *Store) storeBlob(ctx context.Context, org string, j *job, checked *sumSet) (int64, error) {
	key := blobKey(org, j.sum)
	a, err := s.bucket.Attributes(ctx, key)
	switch {
	case err == nil && a.Size == j.size:
		return 0, nil // content addressed: a complete blob of that name is this content
	case err != nil && gcerrors.Code(err) != gcerrors.NotFound:
		return 0, storeError(err, "look up blob %s", key)
	}
	return s.upload(ctx, org, j, checked)
}

// upload writes a blob, reads it back and checks it, and adds it to
// checked; it returns the bytes it uploaded.
func (s *Store) upload(ctx context.Context, org string, j *job, checked *sumSet) (int64, error) {
	key := blobKey(org, j.sum)
	r, err := j.reader()
	if err != nil {
		return 0, err
	}
	w, err := s.bucket.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return 0, storeError(err, "upload blob %s", key)
	}
	if s.opts.hook != nil { // tests stop a Put with a blob half written
		if _, err := copyBuf(w, io.LimitReader(r, j.size/2)); err != nil {
			w.Close()
			return 0, storeError(err, "upload blob %s", key)
		}
		s.hook("blob-half")
	}
	if _, err := copyBuf(w, r); err != nil {
		w.Close()
		return 0, storeError(err, "upload blob %s", key)
	}
	if err := w.Close(); err != nil {
		return 0, storeError(err, "upload blob %s", key)
	}
	s.hook("blob-written " + key)
	if err := s.checkBlob(ctx, key, j.sum, j.size); err != nil {
		s.log.Warn("uploaded blob failed its read-back", zap.String("key", key), zap.Error(err))
		if derr := s.bucket.Delete(ctx, key); derr != nil {
			s.log.Warn("remove bad blob", zap.String("key", key), zap.Error(derr))
		}
		return 0, fmt.Errorf("read back blob %s: %w", key, err)
	}
	checked.add(j.sum)
	return j.size, nil
}

// sumSet is a set of blob sums that several goroutines add to.
type sumSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (c *sumSet) add(sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]bool)
	}
	c.m[sum] = true
}

func (c *sumSet) sums() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m
}

// checkBlob reads a blob and checks its size and sha256.
func (s *Store) checkBlob(ctx context.Context, key, sum string, size int64) error {
	rd, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return &CorruptError{Blob: key, Reason: "the blob is missing"}
		}
		return storeError(err, "read blob %s", key)
	}
	defer rd.Close()
	h := sha256.New()
	n, err := copyBuf(h, rd)
	if err != nil {
		return storeError(err, "read blob %s", key)
	}
	return checkSum(key, h, n, sum, size)
}

var bufPool = sync.Pool{New: func() any { return new([256 << 10]byte) }}

// copyBuf is io.Copy with a pooled buffer. It hides ReadFrom and
// WriteTo: blob.Writer's and blob.Reader's allocate 1 MiB per call,
// which was a quarter of an archive's CPU time.
func copyBuf(w io.Writer, r io.Reader) (int64, error) {
	buf := bufPool.Get().(*[256 << 10]byte)
	defer bufPool.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{r}, buf[:])
}

func checkSum(key string, h hash.Hash, n int64, sum string, size int64) error {
	if n != size {
		return &CorruptError{Blob: key, Reason: fmt.Sprintf("the blob has %d bytes, the manifest says %d", n, size)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return &CorruptError{Blob: key, Reason: fmt.Sprintf("the content's sha256 is %s, the manifest says %s", got, sum)}
	}
	return nil
}

// tarError explains a failure to read the stream.
func tarError(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errs.Wrap(errs.Invalid, err, "the archive stream ends in the middle of an entry (truncated?)")
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong), errors.Is(err, tar.ErrInsecurePath):
		return errs.Wrap(errs.Invalid, err, "not a valid tar stream (send an uncompressed tar)")
	}
	if errs.KindOf(err) != errs.Unknown {
		return err
	}
	return errs.Wrap(errs.Unavailable, err, "reading the archive stream") // the source broke, not the format
}
