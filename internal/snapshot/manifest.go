package snapshot

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/devdepot-ai/agentd/internal/durable"
	"github.com/devdepot-ai/agentd/internal/errs"
)

// header is a manifest's first line.
type header struct {
	Format   int      `json:"format"`
	Snapshot Snapshot `json:"snapshot"`
	// FromTree is true for a snapshot taken of a live tree by Create (its
	// entries carry stamps the next Create can trust), false for an import.
	FromTree bool `json:"from_tree,omitempty"`
}

// diskEntry is an Entry as a manifest line. Names that are not valid
// UTF-8 go in the byte fields (base64), since JSON strings would mangle
// them.
type diskEntry struct {
	P    string `json:"p,omitempty"`
	PB   []byte `json:"pb,omitempty"`
	T    string `json:"t"`
	M    uint32 `json:"m"`
	S    int64  `json:"s,omitempty"`
	H    string `json:"h,omitempty"`
	L    string `json:"l,omitempty"`
	LB   []byte `json:"lb,omitempty"`
	MT   int64  `json:"mt,omitempty"`
	CT   int64  `json:"ct,omitempty"`
	Ino  uint64 `json:"i,omitempty"`
	Dev  uint64 `json:"d,omitempty"`
	Racy bool   `json:"r,omitempty"`
}

func toDisk(e *Entry) diskEntry {
	d := diskEntry{T: string(rune(e.Type)), M: e.Mode, S: e.Size, H: e.SHA256,
		CT: e.stamp.ctime, Ino: e.stamp.ino, Dev: e.stamp.dev, Racy: e.stamp.racy}
	if !e.ModTime.IsZero() {
		d.MT = e.ModTime.UnixNano()
	}
	if utf8.ValidString(e.Path) {
		d.P = e.Path
	} else {
		d.PB = []byte(e.Path)
	}
	if utf8.ValidString(e.Target) {
		d.L = e.Target
	} else {
		d.LB = []byte(e.Target)
	}
	return d
}

func fromDisk(d *diskEntry) (Entry, error) {
	e := Entry{Path: d.P, Mode: d.M, Size: d.S, SHA256: d.H, Target: d.L,
		stamp: stamp{ctime: d.CT, ino: d.Ino, dev: d.Dev, racy: d.Racy}}
	if d.PB != nil {
		e.Path = string(d.PB)
	}
	if d.LB != nil {
		e.Target = string(d.LB)
	}
	if d.MT != 0 {
		e.ModTime = time.Unix(0, d.MT)
	}
	if len(d.T) != 1 {
		return e, fmt.Errorf("entry %q: bad type %q", e.Path, d.T)
	}
	e.Type = Type(d.T[0])
	switch e.Type {
	case TypeFile:
		if !isHash(e.SHA256) || e.Size < 0 {
			return e, fmt.Errorf("entry %q: bad hash or size", e.Path)
		}
	case TypeDir, TypeSymlink:
	default:
		return e, fmt.Errorf("entry %q: bad type %q", e.Path, d.T)
	}
	return e, nil
}

func (s *Store) manifestPath(id string) string { return filepath.Join(s.manDir, id) }

// writeManifest writes the manifest of h with entries: to a temporary
// file, synced, renamed into place, directory synced. Before it returns
// nil nothing is visible; after, the snapshot is durable.
func (s *Store) writeManifest(h *header, entries []Entry) (err error) {
	f, err := os.CreateTemp(s.tmpDir, "manifest-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	h.Format = manifestFormat
	if err := enc.Encode(h); err != nil {
		return err
	}
	for i := range entries {
		if err := enc.Encode(toDisk(&entries[i])); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.manifestPath(h.Snapshot.ID)); err != nil {
		return err
	}
	return durable.SyncDir(s.manDir)
}

func (s *Store) openManifest(id string) (*os.File, *json.Decoder, error) {
	f, err := os.Open(s.manifestPath(id))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, notFound(id)
		}
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return f, json.NewDecoder(bufio.NewReaderSize(f, 256<<10)), nil
}

func decodeHeader(id string, dec *json.Decoder) (*header, error) {
	var h header
	if err := dec.Decode(&h); err != nil {
		return nil, corrupt(id, err)
	}
	if h.Format != manifestFormat {
		return nil, corrupt(id, fmt.Errorf("format %d, want %d", h.Format, manifestFormat))
	}
	if h.Snapshot.ID != id {
		return nil, corrupt(id, fmt.Errorf("it names itself %q", h.Snapshot.ID))
	}
	return &h, nil
}

func corrupt(id string, err error) error {
	return errs.Wrap(errs.Unknown, err, "snapshot %s: corrupt manifest", id)
}

// readHeader reads the first line of a manifest only.
func (s *Store) readHeader(id string) (*header, error) {
	f, dec, err := s.openManifest(id)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeHeader(id, dec)
}

// readManifest reads a manifest: header and entries.
func (s *Store) readManifest(id string) (*header, []Entry, error) {
	f, dec, err := s.openManifest(id)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	h, err := decodeHeader(id, dec)
	if err != nil {
		return nil, nil, err
	}
	n := h.Snapshot.Files + h.Snapshot.Dirs + h.Snapshot.Symlinks
	entries := make([]Entry, 0, min(max(n, 0), 1<<20))
	for {
		var d diskEntry
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, corrupt(id, err)
		}
		e, err := fromDisk(&d)
		if err != nil {
			return nil, nil, corrupt(id, err)
		}
		entries = append(entries, e)
	}
	return h, entries, nil
}
