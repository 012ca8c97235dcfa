package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/tarcheck"
)

// OpenFunc opens the content of a file entry for PutEntries.
type OpenFunc func(ctx context.Context, e Entry) (io.ReadCloser, error)

// ErrChanged is matched (errors.Is) by PutEntries' error when a file's
// content is not what its entry says (the file changed after the
// entries were taken).
var ErrChanged = errors.New("file changed since its entry was taken")

// PutEntries stores a new archive of org from entries whose sha256 the
// caller knows already (an agentd snapshot's manifest: SnapshotService
// Get), asking open only for the contents the org does not have. An
// unchanged workspace so archives again without moving its contents:
// one existence check per distinct content and a manifest.
//
// What open returns is checked against the entry's size and sha256
// before it is uploaded (and read back after); a mismatch fails the
// archive with an error matching ErrChanged and naming the file. The
// guarantees are Put's: the manifest is written last, and an archive
// PutEntries did not finish leaves only what GC removes.
func (s *Store) PutEntries(ctx context.Context, org, label string, entries []Entry, open OpenFunc) (*Manifest, error) {
	if err := checkOrg(org); err != nil {
		return nil, err
	}
	if err := checkLabel(label); err != nil {
		return nil, err
	}
	m := &Manifest{Format: manifestFormat, Org: org, Label: label}
	if err := m.setEntries(entries); err != nil {
		return nil, err
	}
	l := s.orgLock(org)
	l.RLock()
	defer l.RUnlock()

	start := s.opts.Now()
	m.ID, m.Created = newID(start), start.UTC()
	pk := pendingKey(org, m.ID)
	if err := s.bucket.WriteAll(ctx, pk, []byte(start.UTC().Format(time.RFC3339Nano)), nil); err != nil {
		return nil, storeError(err, "write pending marker")
	}
	defer s.removePending(ctx, pk)
	s.hook("started")

	var checked sumSet
	n, err := s.fillBlobs(ctx, m, open, &checked)
	if err != nil {
		return nil, err
	}
	m.NewBytes, m.checked = n, checked.sums()
	return m, s.commit(ctx, m)
}

// setEntries checks entries and takes them as the manifest's.
func (m *Manifest) setEntries(entries []Entry) error {
	if len(entries) > MaxEntries {
		return errs.New(errs.Exhausted, "the archive has more than %d entries", MaxEntries)
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		p, err := tarcheck.RelPath(e.Path)
		if err != nil {
			return err
		}
		if p == "" || p != e.Path || seen[p] {
			return errs.New(errs.Invalid, "entry path %q: want a clean relative path, once", e.Path)
		}
		seen[p] = true
		switch e.Type {
		case TypeFile:
			if e.Size < 0 || !hexRE.MatchString(e.SHA256) {
				return errs.New(errs.Invalid, "file entry %q: size %d, sha256 %q: want a size and a lower-case hex sha256", e.Path, e.Size, e.SHA256)
			}
		case TypeSymlink:
			if e.Target == "" {
				return errs.New(errs.Invalid, "symlink %q has an empty target", e.Path)
			}
		case TypeDir:
		default:
			return errs.New(errs.Invalid, "entry %q has type %q: want dir, file or symlink", e.Path, e.Type)
		}
		e.Mode &= 0o7777
		e.ModTime = e.ModTime.UTC()
		m.Entries = append(m.Entries, e)
		m.count(e, 1)
	}
	return nil
}

// fillBlobs uploads the contents of m's files that the org lacks,
// Options.Uploads at a time, and returns the bytes uploaded.
func (s *Store) fillBlobs(ctx context.Context, m *Manifest, open OpenFunc, checked *sumSet) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *Entry)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		total int64
	)
	for range s.opts.Uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				n, err := s.fillBlob(ctx, m.Org, e, open, checked)
				mu.Lock()
				total += n
				if err != nil && first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	seen := make(map[string]bool)
feed:
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != TypeFile || seen[e.SHA256] {
			continue
		}
		seen[e.SHA256] = true
		select {
		case work <- e:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return total, ctx.Err()
}

// fillBlob makes sure the org has e's content.
func (s *Store) fillBlob(ctx context.Context, org string, e *Entry, open OpenFunc, checked *sumSet) (int64, error) {
	key := blobKey(org, e.SHA256)
	a, err := s.bucket.Attributes(ctx, key)
	switch {
	case err == nil && a.Size == e.Size:
		return 0, nil
	case err != nil && gcerrors.Code(err) != gcerrors.NotFound:
		return 0, storeError(err, "look up blob %s", key)
	}
	rc, err := open(ctx, *e)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", e.Path, err)
	}
	defer rc.Close()
	j := job{size: e.Size}
	h := sha256.New()
	var n int64
	if e.Size <= s.opts.MemoryBytes/4 {
		j.data = make([]byte, e.Size)
		var k int
		k, err = io.ReadFull(rc, j.data)
		n = int64(k)
		h.Write(j.data[:k])
	} else {
		f, ferr := os.CreateTemp(s.opts.TempDir, "agenthub-archive-*")
		if ferr != nil {
			return 0, errs.Wrap(errs.KindOf(ferr), ferr, "temporary file for a large file")
		}
		os.Remove(f.Name())
		defer f.Close()
		n, err = io.CopyN(io.MultiWriter(f, h), rc, e.Size)
		j.file = f
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, fmt.Errorf("read %s: %w", e.Path, err)
	}
	var one [1]byte
	if k, _ := rc.Read(one[:]); k > 0 {
		n++
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != e.Size || got != e.SHA256 {
		return 0, errs.Wrap(errs.Precondition, ErrChanged, "file %q: read %d bytes with sha256 %s, its entry says %d bytes, %s (take the entries again)", e.Path, n, got, e.Size, e.SHA256)
	}
	j.sum = e.SHA256
	return s.upload(ctx, org, &j, checked)
}

// commit writes a finished archive's manifest, its blobs on disk first.
func (s *Store) commit(ctx context.Context, m *Manifest) error {
	s.hook("uploaded")
	// On a file:// store, the blobs reach the disk before the manifest
	// that names them (one syncfs), and the manifest before Put returns.
	// An archive that uploaded nothing (an unchanged workspace) syncs
	// only its manifest: a syncfs would write back whatever else is dirty
	// on that file system (the restore that just wrote the workspace).
	uploaded := len(m.checked) > 0
	if uploaded {
		if err := s.sync(); err != nil {
			return err
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	key := manifestKey(m.Org, m.ID)
	if err := s.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return storeError(err, "write manifest of archive %s", m.ID)
	}
	if uploaded {
		err = s.sync()
	} else {
		err = s.syncFile(key)
	}
	if err != nil {
		return err
	}
	s.hook("committed")
	return nil
}

// removePending removes a Put's pending marker, whatever happened to the
// Put: what a failed one uploaded is for GC, and a finished one has its
// manifest.
func (s *Store) removePending(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		s.log.Warn("remove pending marker", zap.String("key", key), zap.Error(err))
	}
}
