package archive

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"io"
	"sync"

	"gocloud.dev/gcerrors"
	"golang.org/x/sync/semaphore"
)

// Restore writes archive id of org to w as a tar stream in the snapshot
// export format, which agentd's snapshot Import takes: the entries in
// the order Put read them, with their modes, modification times, sizes
// and symlink targets.
//
// Every file's content is checked against the sha256 and size its
// manifest names while it is produced; a mismatch or a missing blob
// ends Restore with a *CorruptError naming the file (errors.Is
// ErrCorrupt). The tar's end is written only after every file passed,
// so on any error w has received an unfinished archive: the caller
// must abort the stream it feeds (io.Pipe's CloseWithError), never end
// it cleanly.
func (s *Store) Restore(ctx context.Context, org, id string, w io.Writer) (*Manifest, error) {
	m, err := s.Get(ctx, org, id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := s.prefetch(ctx, m)
	defer f.stop()

	tw := tar.NewWriter(w)
	for i := range m.Entries {
		e := &m.Entries[i]
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode), ModTime: e.ModTime}
		if e.ModTime.Nanosecond() != 0 {
			hdr.Format = tar.FormatPAX // keep sub-second times
		}
		switch e.Type {
		case TypeDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
		case TypeSymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
		case TypeFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		default:
			return nil, &CorruptError{Archive: id, Path: e.Path, Reason: "unknown entry type " + string(e.Type)}
		}
		if e.Type != TypeFile {
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			continue
		}
		if ch := f.results[i]; ch != nil {
			r := <-ch
			if r.err != nil {
				return nil, r.err
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			if _, err := tw.Write(r.data); err != nil {
				return nil, err
			}
			f.mem.Release(e.Size)
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if err := s.streamFile(ctx, m, e, tw); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return m, nil
}

// streamFile copies a large file's blob to w, checking it on the way.
func (s *Store) streamFile(ctx context.Context, m *Manifest, e *Entry, w io.Writer) error {
	key := blobKey(m.Org, e.SHA256)
	rd, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return &CorruptError{Archive: m.ID, Path: e.Path, Blob: key, Reason: "the blob is missing"}
		}
		return storeError(err, "read blob %s", key)
	}
	defer rd.Close()
	h := sha256.New()
	n, err := copyBuf(io.MultiWriter(w, h), io.LimitReader(rd, e.Size+1))
	if err != nil {
		return storeError(err, "read blob %s", key)
	}
	return fileError(m, e, checkSum(key, h, n, e.SHA256, e.Size))
}

// fileError names the file in a blob's CorruptError.
func fileError(m *Manifest, e *Entry, err error) error {
	if ce, ok := err.(*CorruptError); ok {
		ce.Archive, ce.Path = m.ID, e.Path
	}
	return err
}

// prefetcher fetches the small files of a manifest ahead of the tar
// writer, Options.Uploads at a time, holding at most
// Options.MemoryBytes.
type prefetcher struct {
	results []chan fetched // by entry index; nil for entries not prefetched
	mem     *semaphore.Weighted
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type fetched struct {
	data []byte
	err  error
}

func (s *Store) prefetch(ctx context.Context, m *Manifest) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	f := &prefetcher{results: make([]chan fetched, len(m.Entries)), mem: semaphore.NewWeighted(s.opts.MemoryBytes), cancel: cancel}
	var order []int
	for i := range m.Entries {
		if e := &m.Entries[i]; e.Type == TypeFile && e.Size <= s.opts.MemoryBytes/4 {
			f.results[i] = make(chan fetched, 1)
			order = append(order, i)
		}
	}
	work := make(chan int)
	f.wg.Add(1)
	go func() { // in order, so that the writer's next file is always on its way
		defer f.wg.Done()
		defer close(work)
		for _, i := range order {
			if err := f.mem.Acquire(ctx, m.Entries[i].Size); err != nil {
				f.results[i] <- fetched{err: err}
				return
			}
			select {
			case work <- i:
			case <-ctx.Done():
				f.results[i] <- fetched{err: ctx.Err()}
				return
			}
		}
	}()
	for range s.opts.Uploads {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for i := range work {
				e := &m.Entries[i]
				data, err := s.fetch(ctx, m.Org, e)
				f.results[i] <- fetched{data: data, err: fileError(m, e, err)}
			}
		}()
	}
	return f
}

func (f *prefetcher) stop() {
	f.cancel()
	f.wg.Wait()
}

// fetch reads a small file's blob and checks it.
func (s *Store) fetch(ctx context.Context, org string, e *Entry) ([]byte, error) {
	key := blobKey(org, e.SHA256)
	rd, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, &CorruptError{Blob: key, Reason: "the blob is missing"}
		}
		return nil, storeError(err, "read blob %s", key)
	}
	defer rd.Close()
	data := make([]byte, e.Size)
	n, err := io.ReadFull(rd, data)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return nil, &CorruptError{Blob: key, Reason: "the blob is shorter than the manifest says"}
	}
	if err != nil {
		return nil, storeError(err, "read blob %s", key)
	}
	var one [1]byte
	if k, _ := rd.Read(one[:]); k > 0 {
		return nil, &CorruptError{Blob: key, Reason: "the blob is longer than the manifest says"}
	}
	h := sha256.New()
	h.Write(data[:n])
	if err := checkSum(key, h, int64(n), e.SHA256, e.Size); err != nil {
		return nil, err
	}
	return data, nil
}

// Verify reads every blob archive id of org names and checks its size
// and sha256: a nil error means the archive restores. A bad or missing
// blob is reported as a *CorruptError naming a file that uses it.
func (s *Store) Verify(ctx context.Context, org, id string) error {
	m, err := s.Get(ctx, org, id)
	if err != nil {
		return err
	}
	return s.verify(ctx, m, nil)
}

// VerifyRest is Verify for the manifest a Put, PutEntries or PutDir of
// this Store just returned: it reads back the blobs that call did not
// upload and read back itself (the ones the org had already), so that
// every blob of the archive has been read back once. A manifest from
// Get has no such record, and VerifyRest reads every blob of it.
func (s *Store) VerifyRest(ctx context.Context, m *Manifest) error {
	if err := checkOrg(m.Org); err != nil {
		return err
	}
	return s.verify(ctx, m, m.checked)
}

// verify reads back the blobs of m that skip does not hold.
func (s *Store) verify(ctx context.Context, m *Manifest, skip map[string]bool) error {
	org := m.Org
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *Entry)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range s.opts.Uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				err := s.checkBlob(ctx, blobKey(org, e.SHA256), e.SHA256, e.Size)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fileError(m, e, err)
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	seen := make(map[string]bool)
feed:
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != TypeFile || seen[e.SHA256] || skip[e.SHA256] {
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
		return first
	}
	return ctx.Err()
}
