package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Options configures a Store. Zero fields get defaults in Open.
type Options struct {
	// Dir is the store's directory, created if missing (0700). Required.
	Dir string
	// Protect lists absolute paths that are never copied into a snapshot
	// and never removed by Restore's delete-extra (the daemon's state
	// directory, say). Dir is always protected.
	Protect []string
	// Workers is how many files are hashed, compressed or restored at
	// once. Default: GOMAXPROCS.
	Workers int
	// RacyWindow: a file changed less than this long before a snapshot
	// started is read again by the next snapshot even if it looks
	// unchanged, because another change within the file system's timestamp
	// granularity would not show. Default 2 s (FAT's granularity; ext4 and
	// APFS need far less).
	RacyWindow time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Open opens a file of a tree for reading. Default: open read-only,
	// not following symlinks, not blocking on named pipes. Tests count
	// reads or simulate unreadable or changing files with it.
	Open func(name string) (File, error)
	// Logger gets warnings (a corrupt manifest, a failed collection).
	// Default: a no-op logger.
	Logger *zap.Logger
}

// File is a file of a tree, open for reading.
type File interface {
	io.Reader
	io.Closer
	Stat() (fs.FileInfo, error)
}

// Store is a directory of snapshots. It is safe for concurrent use by one
// process.
type Store struct {
	opts    Options
	dir     string
	blobDir string
	manDir  string
	tmpDir  string
	packDir string
	log     *zap.Logger
	codecs  codecs

	// mu guards pins, index and packs, and serialises collection with
	// pinning.
	mu    sync.Mutex
	pins  map[string]int // blob hash → operations in progress that refer to it
	index map[[32]byte]packLoc
	packs map[string]*packInfo

	// failWrite, when set (tests), is called before each blob write; an
	// error it returns is the write's error.
	failWrite func() error
}

const manifestFormat = 1

// Open opens the store in opts.Dir, creating it if needed, and removes
// the temporary files a crash may have left.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("snapshot store: no directory given")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.RacyWindow == 0 {
		opts.RacyWindow = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Open == nil {
		opts.Open = func(name string) (File, error) {
			f, err := openSource(name)
			if err != nil {
				return nil, err
			}
			return f, nil
		}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	protect := []string{dir}
	for _, p := range opts.Protect {
		if filepath.IsAbs(p) {
			protect = append(protect, filepath.Clean(p))
		}
	}
	opts.Protect = protect
	s := &Store{
		opts:    opts,
		dir:     dir,
		blobDir: filepath.Join(dir, "blobs"),
		manDir:  filepath.Join(dir, "manifests"),
		tmpDir:  filepath.Join(dir, "tmp"),
		packDir: filepath.Join(dir, "packs"),
		log:     opts.Logger,
		pins:    make(map[string]int),
		index:   make(map[[32]byte]packLoc),
		packs:   make(map[string]*packInfo),
	}
	for _, d := range []string{dir, s.blobDir, s.manDir, s.tmpDir, s.packDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("snapshot store: %w", err)
		}
	}
	tmps, err := os.ReadDir(s.tmpDir)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	for _, de := range tmps {
		_ = os.RemoveAll(filepath.Join(s.tmpDir, de.Name()))
	}
	if err := s.loadPacks(); err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// List returns every snapshot, oldest first. A manifest that cannot be
// read is logged and left out.
func (s *Store) List(ctx context.Context) ([]*Snapshot, error) {
	hs, err := s.headers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Snapshot, len(hs))
	for i, h := range hs {
		out[i] = &h.Snapshot
	}
	return out, nil
}

// headers reads every manifest's header, oldest first.
func (s *Store) headers(ctx context.Context) ([]*header, error) {
	des, err := os.ReadDir(s.manDir)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var hs []*header
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if checkID(de.Name()) != nil {
			continue
		}
		h, err := s.readHeader(de.Name())
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // deleted meanwhile: not worth a word
				s.log.Warn("unreadable snapshot manifest", zap.String("id", de.Name()), zap.Error(err))
			}
			continue
		}
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool {
		a, b := hs[i].Snapshot, hs[j].Snapshot
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.ID < b.ID
	})
	return hs, nil
}

// Get returns a snapshot and its entries, sorted by path.
func (s *Store) Get(ctx context.Context, id string) (*Snapshot, []Entry, error) {
	if err := checkID(id); err != nil {
		return nil, nil, err
	}
	h, entries, err := s.readManifest(id)
	if err != nil {
		return nil, nil, err
	}
	return &h.Snapshot, entries, nil
}

// Delete removes a snapshot, then every blob that no remaining snapshot
// (and no operation in progress) refers to. It returns the bytes freed.
// A failed collection is logged, not returned: the snapshot is gone
// either way, and the next Delete collects what this one left.
func (s *Store) Delete(ctx context.Context, id string) (int64, error) {
	if err := checkID(id); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.manifestPath(id)
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, notFound(id)
		}
		return 0, errs.Wrap(errs.KindOf(err), err, "delete snapshot %s", id)
	}
	freed, err := s.collectLocked(ctx, nil)
	if err != nil {
		s.log.Warn("collecting unreferenced blobs", zap.String("deleted", id), zap.Error(err))
	}
	return freed, nil
}

// GC removes every blob no snapshot and no operation in progress refers
// to — those a crash left behind, say — and returns the bytes freed.
func (s *Store) GC(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collectLocked(ctx, nil)
}

// collectSet narrows a collection to what one failed operation wrote.
type collectSet struct {
	loose map[string]int64
	packs []*packInfo
}

// collectLocked removes the blobs that no manifest and no operation in
// progress refers to, among only (nil: all), and returns the bytes freed.
// s.mu is held. If any manifest cannot be read it removes nothing: better
// a blob too many than a snapshot missing one.
func (s *Store) collectLocked(ctx context.Context, only *collectSet) (int64, error) {
	des, err := os.ReadDir(s.manDir)
	if err != nil {
		return 0, err
	}
	refs := make(map[string]struct{}, len(s.pins))
	for h := range s.pins {
		refs[h] = struct{}{}
	}
	for _, de := range des {
		if checkID(de.Name()) != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_, entries, err := s.readManifest(de.Name())
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return 0, fmt.Errorf("manifest %s: %w", de.Name(), err)
		}
		for i := range entries {
			if h := entries[i].SHA256; h != "" {
				refs[h] = struct{}{}
			}
		}
	}
	var freed int64
	remove := func(h string) {
		if _, ok := refs[h]; ok {
			return
		}
		p := s.blobPath(h)
		fi, err := os.Lstat(p)
		if err != nil {
			return
		}
		if os.Remove(p) == nil {
			freed += fi.Size()
		}
	}
	if only != nil {
		for h := range only.loose {
			remove(h)
		}
		if len(only.packs) == 0 {
			return freed, nil
		}
		n, err := s.collectPacksLocked(refs, only.packs)
		return freed + n, err
	}
	for i := range 256 {
		sub := filepath.Join(s.blobDir, fmt.Sprintf("%02x", i))
		names, err := readNames(sub)
		if errors.Is(err, fs.ErrNotExist) {
			continue // made when its first blob is stored
		}
		if err != nil {
			return freed, err
		}
		for _, n := range names {
			if isHash(n) {
				remove(n)
			}
		}
	}
	n, err := s.collectPacksLocked(refs, nil)
	return freed + n, err
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func notFound(id string) error {
	return errs.New(errs.NotFound, "no snapshot %s (list the snapshots to see their ids)", id)
}

// op is one operation's hold on the store: the blobs it refers to while
// it runs (pinned, so that collection leaves them alone) and, for an
// operation that stores blobs, its pack writer and what it wrote, so that
// a failure can take it all back.
type op struct {
	s    *Store
	held map[string]struct{}
	pack *packWriter

	mu    sync.Mutex
	loose map[string]int64 // loose blobs written → compressed size
}

// readOp starts an operation that only reads blobs.
func (s *Store) readOp() *op {
	return &op{s: s, held: make(map[string]struct{})}
}

// writeOp starts an operation that stores blobs. It must end with end.
func (s *Store) writeOp() *op {
	o := s.readOp()
	o.pack = &packWriter{s: s, added: make(map[[32]byte]bool)}
	o.loose = make(map[string]int64)
	return o
}

func (o *op) pinLocked(h string) {
	if _, ok := o.held[h]; ok {
		return
	}
	o.held[h] = struct{}{}
	o.s.pins[h]++
}

// pinHas pins blob h and reports whether the store has it: in a pack or,
// with loose, as a loose blob (content up to smallFile is never loose:
// no need to look).
func (o *op) pinHas(h string, loose bool) bool {
	key, err := hashKey(h)
	if err != nil {
		return false
	}
	o.s.mu.Lock()
	o.pinLocked(h)
	_, ok := o.s.index[key]
	o.s.mu.Unlock()
	if ok || !loose {
		return ok
	}
	_, err = os.Lstat(o.s.blobPath(h))
	return err == nil
}

// reserveLoose reports whether the caller is the first of the
// operation's workers to store loose blob h (two files of a tree may have
// the same content).
func (o *op) reserveLoose(h string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.loose[h]; ok {
		return false
	}
	o.loose[h] = 0
	return true
}

func (o *op) wroteLoose(h string, n int64) {
	o.mu.Lock()
	o.loose[h] = n
	o.mu.Unlock()
}

// commit finishes the operation's pack: after it, everything the
// operation wrote is durable and a manifest may refer to it.
func (o *op) commit() error {
	return o.pack.finish()
}

// end ends the operation. Unless ok, what it wrote is taken back: the
// pack being written is dropped, and published packs and loose blobs
// are collected (as far as nothing else refers to them by now).
func (o *op) end(ok bool) {
	if o.pack != nil && !ok {
		o.pack.abort()
	}
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	for h := range o.held {
		if o.s.pins[h]--; o.s.pins[h] <= 0 {
			delete(o.s.pins, h)
		}
	}
	o.held = nil
	if o.pack == nil || ok {
		return
	}
	o.mu.Lock()
	set := &collectSet{loose: o.loose, packs: o.pack.published}
	o.mu.Unlock()
	if len(set.loose) == 0 && len(set.packs) == 0 {
		return
	}
	if _, err := o.s.collectLocked(context.Background(), set); err != nil {
		o.s.log.Warn("removing the blobs of a failed snapshot", zap.Error(err))
	}
}

// pinSnapshot reads snapshot id and pins its blobs to o, atomically with
// respect to Delete: either the snapshot is still there and its blobs
// stay until o ends, or it is reported not found.
func (s *Store) pinSnapshot(id string, o *op) (*header, []Entry, error) {
	h, entries, err := s.readManifest(id)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Lstat(s.manifestPath(id)); err != nil {
		return nil, nil, notFound(id)
	}
	for i := range entries {
		if entries[i].SHA256 != "" {
			o.pinLocked(entries[i].SHA256)
		}
	}
	return h, entries, nil
}

// protected reports whether abs is one of the paths never copied or removed.
func (s *Store) protected(abs string) bool {
	for _, p := range s.opts.Protect {
		if abs == p {
			return true
		}
	}
	return false
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator)) || dir == string(filepath.Separator)
}
