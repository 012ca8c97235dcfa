package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/durable"
)

// Small blobs live in packs: files of concatenated zstd frames followed
// by an index of them. One file per small file would cost a file
// creation (and an fsync) each — on a journaling file system the most
// expensive part of a first snapshot of a tree of small files — and a
// file system block each. A pack is written by one operation to a
// temporary file, synced and renamed into place complete, index
// included; packs never change after that. Collection rewrites a pack
// without its dead blobs (or removes it when none is left alive).
//
// Pack file layout (integers little-endian):
//
//	frame 0 | frame 1 | … | index entries | crc32 of the entries | entry count u32 | "AGSPACK1"
//	index entry: sha256 [32]byte | offset u64 | length u32
const (
	packMagic     = "AGSPACK1"
	packEntrySize = 32 + 8 + 4
	packTailSize  = 4 + 4 + len(packMagic)
	// packTarget is the size at which an operation starts a new pack.
	packTarget = 64 << 20
)

type packEntry struct {
	key [32]byte
	off int64
	n   uint32
}

// packInfo describes a pack file.
type packInfo struct {
	name    string
	size    int64
	entries []packEntry
}

// packLoc is where a packed blob is.
type packLoc struct {
	pack *packInfo
	off  int64
	n    uint32
}

func (s *Store) packPath(name string) string { return filepath.Join(s.packDir, name) }

// loadPacks reads the index of every pack. A pack whose index cannot be
// read is logged and left alone: its blobs are missing, which a restore
// that needs them reports.
func (s *Store) loadPacks() error {
	names, err := readNames(s.packDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		info, err := readPackIndex(s.packPath(name), name)
		if err != nil {
			s.log.Warn("unreadable snapshot pack", zap.String("pack", name), zap.Error(err))
			continue
		}
		s.addPackLocked(info)
	}
	return nil
}

// addPackLocked makes a pack's blobs findable. A blob already found in
// another pack keeps that place. s.mu is held (or the store is not shared
// yet).
func (s *Store) addPackLocked(info *packInfo) {
	s.packs[info.name] = info
	for _, e := range info.entries {
		if _, ok := s.index[e.key]; !ok {
			s.index[e.key] = packLoc{pack: info, off: e.off, n: e.n}
		}
	}
}

func readPackIndex(path, name string) (*packInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size < int64(packTailSize) {
		return nil, errors.New("too short for a pack")
	}
	tail := make([]byte, packTailSize)
	if _, err := f.ReadAt(tail, size-int64(packTailSize)); err != nil {
		return nil, err
	}
	if string(tail[8:]) != packMagic {
		return nil, errors.New("not a pack (no magic at its end)")
	}
	count := int64(binary.LittleEndian.Uint32(tail[4:8]))
	start := size - int64(packTailSize) - count*packEntrySize
	if start < 0 {
		return nil, errors.New("index larger than the pack")
	}
	raw := make([]byte, count*packEntrySize)
	if _, err := f.ReadAt(raw, start); err != nil {
		return nil, err
	}
	if crc32.ChecksumIEEE(raw) != binary.LittleEndian.Uint32(tail[0:4]) {
		return nil, errors.New("index checksum mismatch")
	}
	info := &packInfo{name: name, size: size, entries: make([]packEntry, count)}
	for i := range info.entries {
		b := raw[i*packEntrySize:]
		e := &info.entries[i]
		copy(e.key[:], b[:32])
		e.off = int64(binary.LittleEndian.Uint64(b[32:40]))
		e.n = binary.LittleEndian.Uint32(b[40:44])
		if e.off < 0 || e.off+int64(e.n) > start {
			return nil, fmt.Errorf("entry %d lies outside the pack", i)
		}
	}
	return info, nil
}

// packWriter appends one operation's small blobs to packs.
type packWriter struct {
	s *Store

	mu  sync.Mutex
	cur *openPack // the pack being written; nil: none yet
	// added holds every blob this operation put in a pack, published or
	// not, so that it stores each once.
	added     map[[32]byte]bool
	published []*packInfo
}

// openPack is a pack being written, to a temporary file.
type openPack struct {
	f       *os.File
	bw      *bufio.Writer
	off     int64 // bytes of frames written
	started int64 // bytes handed to the kernel's writeback so far
	entries []packEntry
}

// writebackEvery: a pack's data is handed to writeback in steps of this
// many bytes while it is written.
const writebackEvery = 8 << 20

// add appends a compressed blob. It reports false if this operation added
// the blob already. The worker that fills a pack publishes it.
func (w *packWriter) add(key [32]byte, comp []byte) (bool, error) {
	w.mu.Lock()
	if w.added[key] {
		w.mu.Unlock()
		return false, nil
	}
	if w.cur == nil {
		if err := w.open(); err != nil {
			w.mu.Unlock()
			return false, err
		}
	}
	p := w.cur
	if _, err := p.bw.Write(comp); err != nil {
		w.mu.Unlock()
		return false, storeError(err)
	}
	p.entries = append(p.entries, packEntry{key: key, off: p.off, n: uint32(len(comp))})
	p.off += int64(len(comp))
	w.added[key] = true
	var full *openPack
	switch {
	case p.off >= packTarget:
		full, w.cur = p, nil
	case p.off-p.started >= writebackEvery:
		if err := p.bw.Flush(); err != nil {
			w.mu.Unlock()
			return false, storeError(err)
		}
		startWriteback(p.f, p.started, p.off-p.started)
		p.started = p.off
	}
	w.mu.Unlock()
	if full != nil {
		return true, w.publish(full)
	}
	return true, nil
}

func (w *packWriter) open() error {
	if w.s.failWrite != nil {
		if err := w.s.failWrite(); err != nil {
			return storeError(err)
		}
	}
	f, err := os.CreateTemp(w.s.tmpDir, "pack-*")
	if err != nil {
		return storeError(err)
	}
	w.cur = &openPack{f: f, bw: bufio.NewWriterSize(f, 1<<20)}
	return nil
}

// finish publishes the pack being written, if any.
func (w *packWriter) finish() error {
	w.mu.Lock()
	p := w.cur
	w.cur = nil
	w.mu.Unlock()
	if p == nil {
		return nil
	}
	return w.publish(p)
}

// publish completes pack p with its index, makes it durable, names it
// and makes its blobs findable, in that order.
func (w *packWriter) publish(p *openPack) (err error) {
	defer func() {
		if err != nil {
			p.f.Close()
			os.Remove(p.f.Name())
			err = storeError(err)
		}
	}()
	size, err := writePackIndex(p.bw, p.entries, p.off)
	if err != nil {
		return err
	}
	if err := p.bw.Flush(); err != nil {
		return err
	}
	if err := p.f.Sync(); err != nil {
		return err
	}
	if err := p.f.Close(); err != nil {
		return err
	}
	name := randomSuffix()
	if err := os.Rename(p.f.Name(), w.s.packPath(name)); err != nil {
		return err
	}
	info := &packInfo{name: name, size: size, entries: p.entries}
	// Recorded before the directory sync, so that a failure still lets
	// the operation's clean-up find the pack.
	w.mu.Lock()
	w.published = append(w.published, info)
	w.mu.Unlock()
	w.s.mu.Lock()
	w.s.addPackLocked(info)
	w.s.mu.Unlock()
	return durable.SyncDir(w.s.packDir)
}

// writePackIndex writes the index of entries after frames of dataLen
// bytes and returns the pack's total size.
func writePackIndex(w io.Writer, entries []packEntry, dataLen int64) (int64, error) {
	raw := make([]byte, len(entries)*packEntrySize)
	for i, e := range entries {
		b := raw[i*packEntrySize:]
		copy(b[:32], e.key[:])
		binary.LittleEndian.PutUint64(b[32:40], uint64(e.off))
		binary.LittleEndian.PutUint32(b[40:44], e.n)
	}
	tail := make([]byte, packTailSize)
	binary.LittleEndian.PutUint32(tail[0:4], crc32.ChecksumIEEE(raw))
	binary.LittleEndian.PutUint32(tail[4:8], uint32(len(entries)))
	copy(tail[8:], packMagic)
	if _, err := w.Write(raw); err != nil {
		return 0, err
	}
	if _, err := w.Write(tail); err != nil {
		return 0, err
	}
	return dataLen + int64(len(raw)+len(tail)), nil
}

// abort drops the pack being written.
func (w *packWriter) abort() {
	w.mu.Lock()
	p := w.cur
	w.cur = nil
	w.mu.Unlock()
	if p != nil {
		p.f.Close()
		os.Remove(p.f.Name())
	}
}

// readPacked returns the compressed bytes of blob h if it is packed
// (packed false: it is not, look for a loose blob).
func (s *Store) readPacked(h string, sc *scratch) (comp []byte, packed bool, err error) {
	key, err := hashKey(h)
	if err != nil {
		return nil, false, blobError(h, err)
	}
	// A pack may be rewritten by collection between finding a blob and
	// opening its pack: then the blob has a new place, look again.
	for range 3 {
		s.mu.Lock()
		loc, ok := s.index[key]
		s.mu.Unlock()
		if !ok {
			return nil, false, nil
		}
		f := sc.packs[loc.pack.name]
		if f == nil {
			f, err = os.Open(s.packPath(loc.pack.name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, false, fmt.Errorf("read blob %s: %w", h, err)
			}
			if sc.packs == nil {
				sc.packs = make(map[string]*os.File)
			}
			sc.packs[loc.pack.name] = f
		}
		if cap(sc.comp) < int(loc.n) {
			sc.comp = make([]byte, loc.n)
		}
		buf := sc.comp[:loc.n]
		if _, err := f.ReadAt(buf, loc.off); err != nil {
			return nil, false, blobError(h, err)
		}
		return buf, true, nil
	}
	return nil, false, blobError(h, errors.New("its pack keeps moving"))
}

// collectPacksLocked rewrites or removes the packs (among only; nil: all)
// that hold blobs nothing refers to, and returns the bytes freed. A blob
// is alive if refs has it and the index finds it in this very pack (a
// copy that lost a race to another pack is dead). s.mu is held.
func (s *Store) collectPacksLocked(refs map[string]struct{}, only []*packInfo) (int64, error) {
	candidates := only
	if candidates == nil {
		for _, p := range s.packs {
			candidates = append(candidates, p)
		}
	}
	var freed int64
	for _, p := range candidates {
		if s.packs[p.name] != p {
			continue // gone already
		}
		var live []packEntry
		for _, e := range p.entries {
			loc, ok := s.index[e.key]
			if ok && loc.pack == p && loc.off == e.off {
				if _, ref := refs[hexKey(e.key)]; ref {
					live = append(live, e)
				}
			}
		}
		if len(live) == len(p.entries) {
			continue
		}
		if len(live) == 0 {
			if err := os.Remove(s.packPath(p.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return freed, err
			}
			s.dropPackLocked(p)
			freed += p.size
			continue
		}
		np, err := s.repackLocked(p, live)
		if err != nil {
			return freed, fmt.Errorf("rewrite pack %s: %w", p.name, err)
		}
		freed += p.size - np.size
	}
	return freed, nil
}

// dropPackLocked forgets pack p and the places it held.
func (s *Store) dropPackLocked(p *packInfo) {
	delete(s.packs, p.name)
	for _, e := range p.entries {
		if loc, ok := s.index[e.key]; ok && loc.pack == p {
			delete(s.index, e.key)
		}
	}
}

// repackLocked writes a new pack with the live entries of p, makes it
// durable, points the index at it and removes p.
func (s *Store) repackLocked(p *packInfo, live []packEntry) (*packInfo, error) {
	src, err := os.Open(s.packPath(p.name))
	if err != nil {
		return nil, err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(s.tmpDir, "pack-*")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	var off int64
	entries := make([]packEntry, 0, len(live))
	for _, e := range live {
		if _, err := io.Copy(bw, io.NewSectionReader(src, e.off, int64(e.n))); err != nil {
			return nil, err
		}
		entries = append(entries, packEntry{key: e.key, off: off, n: e.n})
		off += int64(e.n)
	}
	size, err := writePackIndex(bw, entries, off)
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	name := randomSuffix()
	if err := os.Rename(tmp.Name(), s.packPath(name)); err != nil {
		return nil, err
	}
	ok = true
	if err := durable.SyncDir(s.packDir); err != nil {
		return nil, err
	}
	np := &packInfo{name: name, size: size, entries: entries}
	s.dropPackLocked(p)
	s.packs[name] = np
	for _, e := range entries {
		s.index[e.key] = packLoc{pack: np, off: e.off, n: e.n}
	}
	if err := os.Remove(s.packPath(p.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return np, err
	}
	return np, nil
}

func hexKey(k [32]byte) string {
	const digits = "0123456789abcdef"
	var b [64]byte
	for i, c := range k {
		b[2*i] = digits[c>>4]
		b[2*i+1] = digits[c&15]
	}
	return string(b[:])
}
