// Package tarcheck holds the checks a tar stream from elsewhere gets before
// what it says is trusted, shared by the snapshot store (agentd's Import)
// and the hub's archive store:
//
//   - its end: archive/tar's Reader returns io.EOF both at the two zero
//     blocks that end an archive and at a clean end of input after an
//     entry, so a stream that a dropped tunnel or a killed producer cut
//     short would pass for an archive with fewer files. Read through a
//     Reader, and at io.EOF ask Complete.
//   - its entry names: RelPath refuses absolute paths, ".." and NUL bytes.
package tarcheck

import (
	"io"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// blocks is the size of a tar's end marker: two zero 512-byte blocks.
const blocks = 1024

// Reader passes reads through and remembers the last 1024 bytes read.
type Reader struct {
	r    io.Reader
	tail [blocks]byte
	n    int64
}

// NewReader reads from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

func (t *Reader) Read(p []byte) (int, error) {
	k, err := t.r.Read(p)
	if k >= len(t.tail) {
		copy(t.tail[:], p[k-len(t.tail):k])
	} else if k > 0 {
		copy(t.tail[:], t.tail[k:])
		copy(t.tail[len(t.tail)-k:], p[:k])
	}
	t.n += int64(k)
	return k, err
}

// Complete reports whether what was read so far ends with the end marker
// (call it when tar.Reader.Next returned io.EOF). A stream cut right after
// 1024 zero bytes of an entry's content would pass too; that is the limit
// of what the format says.
func (t *Reader) Complete() bool {
	if t.n < int64(len(t.tail)) {
		return false
	}
	for _, b := range t.tail {
		if b != 0 {
			return false
		}
	}
	return true
}

// RelPath turns a tar entry name into a clean relative path ("" for the
// root itself), refusing absolute paths, ".." and NUL bytes.
func RelPath(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", errs.New(errs.Invalid, "entry name %q contains a NUL byte", name)
	}
	if strings.HasPrefix(name, "/") {
		return "", errs.New(errs.Invalid, "entry %q has an absolute path: archive paths must be relative", name)
	}
	var parts []string
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			return "", errs.New(errs.Invalid, "entry %q climbs out of the archive with \"..\"", name)
		default:
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "/"), nil
}
