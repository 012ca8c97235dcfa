package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/tarcheck"
)

// MaxImportEntries bounds the entries of an imported archive.
const MaxImportEntries = 1_000_000

// Export writes snapshot id to w as a tar archive: directories (with a
// trailing slash), files and symlinks, with their modes and modification
// times, paths relative to the snapshot's root, in path order.
func (s *Store) Export(ctx context.Context, id string, w io.Writer) error {
	if err := checkID(id); err != nil {
		return err
	}
	o := s.readOp()
	defer o.end(true)
	_, entries, err := s.pinSnapshot(id, o)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	sc := newScratch()
	defer sc.close()
	for i := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := &entries[i]
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode), ModTime: e.ModTime}
		switch e.Type {
		case TypeDir:
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case TypeFile:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = e.Size
		case TypeSymlink:
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = e.Target
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Type == TypeFile {
			if err := s.copyBlob(tw, e.SHA256, e.Size, sc); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// Import stores the tar archive r as a new snapshot with the given label
// and root (an absolute path: where Restore writes by default).
//
// The archive is untrusted. An entry whose path is absolute or climbs out
// with "..", a hard link to anything but an earlier file of the archive,
// a symlink that points outside the archive (absolute, or climbing out,
// also through other symlinks of the archive), or an entry below a file
// or a symlink is refused, and then nothing is imported: no manifest, and
// the blobs already written are removed. Devices and named pipes are
// skipped and reported; sockets cannot be in a tar.
func (s *Store) Import(ctx context.Context, r io.Reader, label, root string) (*Snapshot, error) {
	if err := checkLabel(label); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(root) {
		return nil, errs.New(errs.Invalid, "import root %q is not an absolute path", root)
	}
	start := s.opts.Now()
	o := s.writeOp()
	ok := false
	defer func() { o.end(ok) }()
	fail := func(err error) (*Snapshot, error) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errs.Wrap(errs.KindOf(err), err, "import refused, nothing was stored")
	}

	byPath := make(map[string]*Entry)
	skipped := &skipList{}
	var stored int64
	sc := newScratch()
	defer sc.close()
	end := tarcheck.NewReader(r)
	tr := tar.NewReader(end)
	headers := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			if !end.Complete() {
				// A stream cut between two entries (a dropped tunnel, a
				// killed producer) must not pass for a smaller archive.
				return fail(errs.New(errs.Invalid, "the tar stream ends without its end marker (two zero blocks) after %d entries: it was cut short", headers))
			}
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // judged below, with a clearer message
		}
		if err != nil {
			if headers == 0 && errors.Is(err, io.ErrUnexpectedEOF) {
				err = tar.ErrHeader // not even one header: not a tar at all
			}
			return fail(tarError(err))
		}
		headers++
		rel, err := tarcheck.RelPath(hdr.Name)
		if err != nil {
			return fail(err)
		}
		if rel == "" { // the root itself
			continue
		}
		e := &Entry{Path: rel, Mode: uint32(hdr.Mode) & 0o7777, ModTime: hdr.ModTime}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Type = TypeDir
		case tar.TypeReg, '\x00':
			h, n, st, err := s.put(o, tr, sc)
			if err != nil {
				var se *sourceError
				if errors.As(err, &se) {
					err = tarError(se.err)
				}
				return fail(err)
			}
			stored += st
			e.Type, e.SHA256, e.Size = TypeFile, h, n
		case tar.TypeSymlink:
			if hdr.Linkname == "" {
				return fail(errs.New(errs.Invalid, "symlink %q has an empty target", hdr.Name))
			}
			e.Type, e.Target = TypeSymlink, hdr.Linkname
		case tar.TypeLink:
			t, err := tarcheck.RelPath(hdr.Linkname)
			if err != nil || t == "" {
				return fail(errs.New(errs.Invalid, "hard link %q points to %q, outside the archive", hdr.Name, hdr.Linkname))
			}
			src := byPath[t]
			if src == nil || src.Type != TypeFile {
				return fail(errs.New(errs.Invalid, "hard link %q points to %q, which is not an earlier file of the archive", hdr.Name, hdr.Linkname))
			}
			e.Type, e.SHA256, e.Size = TypeFile, src.SHA256, src.Size
			if hdr.Mode == 0 {
				e.Mode = src.Mode
			}
		case tar.TypeChar, tar.TypeBlock:
			skipped.add(rel, "device")
			continue
		case tar.TypeFifo:
			skipped.add(rel, "named pipe")
			continue
		default:
			skipped.add(rel, fmt.Sprintf("unsupported tar entry type %q", hdr.Typeflag))
			continue
		}
		byPath[rel] = e
		if len(byPath) > MaxImportEntries {
			return fail(errs.New(errs.Exhausted, "the archive has more than %d entries", MaxImportEntries))
		}
	}

	// Directories an archive implies without listing them.
	now := s.opts.Now()
	for p := range byPath {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := byPath[d]; ok {
				break
			}
			byPath[d] = &Entry{Path: d, Type: TypeDir, Mode: 0o755, ModTime: now}
		}
	}
	entries := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		entries = append(entries, *e)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	if err := validateEntries(entries); err != nil {
		return fail(err)
	}
	for i := range entries {
		e := &entries[i]
		if e.Type == TypeSymlink && linkEscapes(byPath, e.Path, e.Target) {
			return fail(errs.New(errs.Invalid, "symlink %q points to %q, outside the archive", e.Path, e.Target))
		}
	}

	snap := &Snapshot{ID: newID(start), Label: label, Root: filepath.Clean(root), Created: start, StoredBytes: stored}
	for i := range entries {
		switch entries[i].Type {
		case TypeFile:
			snap.Files++
			snap.TotalBytes += entries[i].Size
		case TypeDir:
			snap.Dirs++
		case TypeSymlink:
			snap.Symlinks++
		}
	}
	snap.Skipped = skipped.sorted()
	snap.SkippedMore = skipped.more
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := o.commit(); err != nil {
		return fail(err)
	}
	if err := s.writeManifest(&header{Snapshot: *snap}, entries); err != nil {
		return fail(storeError(err))
	}
	ok = true
	return snap, nil
}

// linkEscapes reports whether the symlink at link (relative to the root)
// with target would lead outside the root when followed, following the
// archive's other symlinks on the way as the kernel would.
func linkEscapes(byPath map[string]*Entry, link, target string) bool {
	hops := 0
	var base []string
	if d := path.Dir(link); d != "." {
		base = strings.Split(d, "/")
	}
	_, escaped := resolve(byPath, base, target, &hops)
	return escaped
}

// resolve follows target from the directory base (components below the
// root) and returns where it ends, or escaped if it leaves the root.
// More than 40 hops is a loop: the kernel refuses to follow it, so it
// leads nowhere, and in particular not out.
func resolve(byPath map[string]*Entry, base []string, target string, hops *int) (cur []string, escaped bool) {
	if strings.HasPrefix(target, "/") {
		return nil, true
	}
	cur = append([]string(nil), base...)
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, true
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, c)
		e := byPath[strings.Join(cur, "/")]
		if e == nil || e.Type != TypeSymlink {
			continue
		}
		if *hops++; *hops > 40 {
			return cur, false
		}
		next, esc := resolve(byPath, cur[:len(cur)-1], e.Target, hops)
		if esc {
			return nil, true
		}
		cur = next
	}
	return cur, false
}

// tarError explains a failure to read the archive.
func tarError(err error) error {
	switch {
	case errs.KindOf(err) == errs.Canceled:
		return err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errs.Wrap(errs.Invalid, err, "the archive ends in the middle of an entry (truncated upload?)")
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong), errors.Is(err, tar.ErrInsecurePath):
		return errs.Wrap(errs.Invalid, err, "not a valid tar archive (send an uncompressed tar)")
	}
	if errs.KindOf(err) != errs.Unknown {
		return err
	}
	return errs.Wrap(errs.Invalid, err, "reading the archive")
}
