package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/devdepot-ai/agentd/internal/durable"
	"github.com/devdepot-ai/agentd/internal/errs"
)

// smallFile: content up to this size is read, hashed and compressed in
// memory in one go and stored in a pack; larger content is streamed into
// a loose blob of its own.
const smallFile = 1 << 20

// codecs pools zstd encoders and decoders. Each is single-threaded
// (concurrency 1), so it runs no goroutines of its own: the parallelism
// is the Store's worker pool.
type codecs struct {
	enc sync.Pool
	dec sync.Pool
}

func (c *codecs) encoder() *zstd.Encoder {
	if e, ok := c.enc.Get().(*zstd.Encoder); ok {
		return e
	}
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(1<<20),
		zstd.WithEncoderCRC(false), // the sha256 of the content is checked on every read
	)
	if err != nil {
		panic(err) // the options are constant and valid
	}
	return e
}

func (c *codecs) putEncoder(e *zstd.Encoder) { c.enc.Put(e) }

func (c *codecs) decoder() *zstd.Decoder {
	if d, ok := c.dec.Get().(*zstd.Decoder); ok {
		return d
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		panic(err) // the options are constant and valid
	}
	return d
}

func (c *codecs) putDecoder(d *zstd.Decoder) {
	_ = d.Reset(nil)
	c.dec.Put(d)
}

// blobPath is where a loose blob lives.
func (s *Store) blobPath(h string) string { return filepath.Join(s.blobDir, h[:2], h) }

// sourceError is a failure to read the tree or the archive (as opposed to
// the store).
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// storeError classifies a failure to write the store.
func storeError(err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	if errs.KindOf(err) == errs.Exhausted {
		return errs.Wrap(errs.Exhausted, err, "the disk holding the snapshot store is full")
	}
	return errs.Wrap(errs.KindOf(err), err, "write to the snapshot store")
}

// scratch holds one worker's buffers and open packs.
type scratch struct {
	io    []byte // streaming reads
	raw   []byte // a small file's content
	comp  []byte // a small file's compressed content
	packs map[string]*os.File
}

func newScratch() *scratch { return &scratch{io: make([]byte, 256<<10)} }

// close closes the packs the worker opened.
func (sc *scratch) close() {
	for _, f := range sc.packs {
		f.Close()
	}
	sc.packs = nil
}

// put stores the content r yields for operation o and returns its hash,
// its length and the compressed bytes it added to the store. Content up
// to smallFile goes to o's pack; longer content is streamed into a loose
// blob. A read error of r comes back as a *sourceError.
func (s *Store) put(o *op, r io.Reader, sc *scratch) (h string, n int64, stored int64, err error) {
	if cap(sc.raw) < smallFile+1 {
		sc.raw = make([]byte, 0, smallFile+1)
	}
	raw := sc.raw[:0]
	for len(raw) < cap(raw) {
		m, rerr := r.Read(raw[len(raw):cap(raw)])
		raw = raw[:len(raw)+m]
		if rerr == io.EOF {
			h = hashBytes(raw)
			stored, err = s.putSmall(o, h, raw, sc)
			return h, int64(len(raw)), stored, err
		}
		if rerr != nil {
			return "", 0, 0, &sourceError{rerr}
		}
	}
	return s.putLoose(o, io.MultiReader(bytes.NewReader(raw), r), sc.io)
}

// putSmall adds data, whose sha256 is h, to o's pack unless the store
// has it. The blob is pinned first, so collection cannot remove it before
// o's manifest refers to it.
func (s *Store) putSmall(o *op, h string, data []byte, sc *scratch) (int64, error) {
	if o.pinHas(h, false) {
		return 0, nil
	}
	key, err := hashKey(h)
	if err != nil {
		return 0, err
	}
	enc := s.codecs.encoder()
	sc.comp = enc.EncodeAll(data, sc.comp[:0])
	s.codecs.putEncoder(enc)
	added, err := o.pack.add(key, sc.comp)
	if err != nil || !added {
		return 0, err
	}
	return int64(len(sc.comp)), nil
}

// putLoose streams everything r yields into a loose blob, compressing and
// hashing in one pass, through a temporary file that is synced and
// renamed into place (and its directory synced). It returns the content's
// hash and size and the compressed bytes added (0 if the store had the
// content already).
func (s *Store) putLoose(o *op, r io.Reader, buf []byte) (h string, n int64, stored int64, err error) {
	if s.failWrite != nil {
		if err := s.failWrite(); err != nil {
			return "", 0, 0, storeError(err)
		}
	}
	f, err := os.CreateTemp(s.tmpDir, "blob-*")
	if err != nil {
		return "", 0, 0, storeError(err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	enc := s.codecs.encoder()
	defer s.codecs.putEncoder(enc)
	cw := &countWriter{w: f}
	enc.Reset(cw)
	hasher := sha256.New()
	for {
		m, rerr := r.Read(buf)
		if m > 0 {
			hasher.Write(buf[:m])
			n += int64(m)
			if _, err := enc.Write(buf[:m]); err != nil {
				enc.Reset(nil)
				return "", 0, 0, storeError(err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			enc.Reset(nil)
			return "", 0, 0, &sourceError{rerr}
		}
	}
	if err := enc.Close(); err != nil {
		return "", 0, 0, storeError(err)
	}
	h = hex.EncodeToString(hasher.Sum(nil))
	if !o.reserveLoose(h) || o.pinHas(h, true) {
		return h, n, 0, nil
	}
	if err := f.Sync(); err != nil {
		return "", 0, 0, storeError(err)
	}
	if err := f.Close(); err != nil {
		return "", 0, 0, storeError(err)
	}
	done = true
	final := s.blobPath(h)
	err = os.Rename(f.Name(), final)
	if errors.Is(err, fs.ErrNotExist) { // the fan-out directory's first blob
		if err = os.MkdirAll(filepath.Dir(final), 0o700); err == nil {
			err = os.Rename(f.Name(), final)
		}
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, 0, storeError(err)
	}
	o.wroteLoose(h, cw.n)
	if err := durable.SyncDir(filepath.Dir(s.blobPath(h))); err != nil {
		return "", 0, 0, storeError(err)
	}
	return h, n, cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// blobError is the error for a blob that is missing or does not hold
// what its name says.
func blobError(h string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errs.New(errs.Unknown, "the snapshot store is damaged: blob %s is missing", h)
	}
	return errs.Wrap(errs.Unknown, err, "the snapshot store is damaged: blob %s", h)
}

// copyBlob writes the content of blob h to w, checking that it has size
// bytes and hash h. A write error of w comes back unchanged. The caller
// has pinned h.
func (s *Store) copyBlob(w io.Writer, h string, size int64, sc *scratch) error {
	comp, packed, err := s.readPacked(h, sc)
	if err != nil {
		return err
	}
	dec := s.codecs.decoder()
	defer s.codecs.putDecoder(dec)
	hasher := sha256.New()
	var n int64
	if packed {
		data, err := dec.DecodeAll(comp, sc.raw[:0])
		if err != nil {
			return blobError(h, err)
		}
		sc.raw = data
		hasher.Write(data)
		n = int64(len(data))
		if n == size && hex.EncodeToString(hasher.Sum(nil)) == h {
			_, err := w.Write(data)
			return err
		}
		return blobError(h, fmt.Errorf("content does not match its hash (%d bytes, want %d)", n, size))
	}
	f, err := os.Open(s.blobPath(h))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("read blob %s: %w", h, err)
		}
		return blobError(h, err)
	}
	defer f.Close()
	if err := dec.Reset(f); err != nil {
		return blobError(h, err)
	}
	buf := sc.io
	for {
		m, rerr := dec.Read(buf)
		if m > 0 {
			hasher.Write(buf[:m])
			n += int64(m)
			if n > size {
				break
			}
			if _, err := w.Write(buf[:m]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return blobError(h, rerr)
		}
	}
	if n != size || hex.EncodeToString(hasher.Sum(nil)) != h {
		return blobError(h, fmt.Errorf("content does not match its hash (%d bytes, want %d)", n, size))
	}
	return nil
}

// hashReader returns the sha256 of everything r yields and its length.
func hashReader(r io.Reader, buf []byte) (string, int64, error) {
	hasher := sha256.New()
	n, err := io.CopyBuffer(hasher, r, buf)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(hasher.Sum(nil)), n, nil
}

// hashBytes returns the sha256 of b, hex.
func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashKey parses a hex sha256.
func hashKey(h string) ([32]byte, error) {
	var k [32]byte
	if len(h) != 64 {
		return k, fmt.Errorf("bad blob hash %q", h)
	}
	if _, err := hex.Decode(k[:], []byte(h)); err != nil {
		return k, fmt.Errorf("bad blob hash %q", h)
	}
	return k, nil
}
