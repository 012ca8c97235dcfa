package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Limits of ReadLines.
const (
	// DefaultLineCount is how many lines ReadLines returns when not told.
	DefaultLineCount = 2_000
	// MaxLineCount is the most lines one ReadLines call may ask for.
	MaxLineCount = 100_000
	// DefaultMaxLineLen is where ReadLines cuts long lines when not told.
	DefaultMaxLineLen = 2_000
	// MaxMaxLineLen is the largest cut length one may ask for.
	MaxMaxLineLen = 1 << 20
	// MaxLinesBytes bounds the text one ReadLines call returns; past it the
	// result stops early with More set (it must fit a 4 MiB gRPC message).
	MaxLinesBytes = 2 << 20
)

// ReadChunk is a piece of a file handed out by Read.
type ReadChunk struct {
	// Info describes the file (following symlinks); set in the first
	// chunk only.
	Info *Entry
	// Offset is the position in the file of Data's first byte.
	Offset int64
	// Data is up to ChunkSize bytes. It is only valid until emit returns.
	Data []byte
}

// openRegular opens the regular file at p (following symlinks) for
// reading. Directories, devices, pipes and sockets are refused: reading
// them could block forever or never end.
func (f *FS) openRegular(p, use string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(p)
	if err != nil {
		if lfi, lerr := os.Lstat(p); lerr == nil && lfi.Mode()&fs.ModeSymlink != 0 && errors.Is(err, fs.ErrNotExist) {
			t, _ := os.Readlink(p)
			return nil, nil, errs.New(errs.NotFound, "%s is a symlink to %s, which does not exist", p, t)
		}
		return nil, nil, f.pathError(p, err)
	}
	if err := f.checkReadable(p, fi, use); err != nil {
		return nil, nil, err
	}
	file, err := os.Open(p)
	if err != nil {
		return nil, nil, f.pathError(p, err)
	}
	fi, err = file.Stat()
	if err == nil {
		err = f.checkReadable(p, fi, use)
	}
	if err != nil {
		file.Close()
		return nil, nil, f.pathError(p, err)
	}
	return file, fi, nil
}

func (f *FS) checkReadable(p string, fi fs.FileInfo, use string) error {
	switch {
	case fi.IsDir():
		return errs.New(errs.Precondition, "%s is a directory; use List to see its entries%s", p, use)
	case !fi.Mode().IsRegular():
		return errs.New(errs.Precondition, "%s is not a regular file (a socket, device or named pipe); it cannot be read here", p)
	}
	return nil
}

// Read streams the bytes of the file at path from offset, at most limit
// bytes (0: to the end), to emit in chunks of at most ChunkSize bytes. It
// is binary-safe and reads files of any size; it reads up to the end of
// the file as it finds it, so a file that grows is read further than its
// size at open. emit is called at least once, first with Info set (with
// empty Data for an empty range). An error from emit stops the read and is
// returned as is.
func (f *FS) Read(ctx context.Context, path string, offset, limit int64, emit func(ReadChunk) error) error {
	p, err := f.Resolve(path)
	if err != nil {
		return err
	}
	if offset < 0 {
		return errs.New(errs.Invalid, "offset %d is negative", offset)
	}
	if limit < 0 {
		return errs.New(errs.Invalid, "limit %d is negative; use 0 to read to the end", limit)
	}
	file, fi, err := f.openRegular(p, "")
	if err != nil {
		return err
	}
	defer file.Close()
	info := entryOf(p, fi)

	buf := make([]byte, ChunkSize)
	pos := offset
	first := true
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		want := int64(len(buf))
		if limit > 0 {
			want = min(want, offset+limit-pos)
		}
		var n int
		var rerr error
		if want > 0 {
			n, rerr = file.ReadAt(buf[:want], pos)
		} else {
			rerr = io.EOF
		}
		if n > 0 || first {
			c := ReadChunk{Offset: pos, Data: buf[:n]}
			if first {
				c.Info = &info
				first = false
			}
			if err := emit(c); err != nil {
				return err
			}
			pos += int64(n)
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return f.pathError(p, rerr)
		}
	}
}

// LinesOptions says which lines ReadLines returns.
type LinesOptions struct {
	// From is the first line to return, 1-based (0: 1).
	From int64
	// Count is how many lines to return at most (0: DefaultLineCount).
	Count int64
	// MaxLineLen cuts lines longer than this many bytes, with a marker
	// saying how much was cut (0: DefaultMaxLineLen).
	MaxLineLen int
}

// Lines is a range of lines of a text file.
type Lines struct {
	Path   string   // absolute path of the file
	Lines  []string // the lines, without "\n" or "\r\n"; invalid UTF-8 replaced by U+FFFD
	From   int64    // line number of Lines[0]
	Total  int64    // number of lines in the file
	More   bool     // lines follow after the returned ones
	Cut    []int64  // line numbers of the lines that were cut for length
	Size   int64    // size of the file in bytes
	SHA256 string   // hex sha256 of the whole file, for Write and Edit
}

// ReadLines returns a range of lines of the text file at path, with the
// file's line count, size and sha256. A file with a NUL byte in its first
// 8 KiB is taken as binary and refused: Read returns its bytes.
func (f *FS) ReadLines(ctx context.Context, path string, opts LinesOptions) (Lines, error) {
	p, err := f.Resolve(path)
	if err != nil {
		return Lines{}, err
	}
	switch {
	case opts.From < 0:
		return Lines{}, errs.New(errs.Invalid, "from_line %d is negative; lines are numbered from 1", opts.From)
	case opts.Count < 0 || opts.Count > MaxLineCount:
		return Lines{}, errs.New(errs.Invalid, "count %d is out of range: give 0 (default %d) to %d", opts.Count, DefaultLineCount, MaxLineCount)
	case opts.MaxLineLen < 0 || opts.MaxLineLen > MaxMaxLineLen:
		return Lines{}, errs.New(errs.Invalid, "max_line_length %d is out of range: give 0 (default %d) to %d", opts.MaxLineLen, DefaultMaxLineLen, MaxMaxLineLen)
	}
	from := max(opts.From, 1)
	count := opts.Count
	if count == 0 {
		count = DefaultLineCount
	}
	maxLen := opts.MaxLineLen
	if maxLen == 0 {
		maxLen = DefaultMaxLineLen
	}

	file, _, err := f.openRegular(p, "")
	if err != nil {
		return Lines{}, err
	}
	defer file.Close()

	ls := lineSplitter{from: from, end: from + count, maxLen: maxLen, res: Lines{Path: p, From: from}}
	h := sha256.New()
	buf := make([]byte, 256<<10)
	var size int64
	for {
		if err := ctx.Err(); err != nil {
			return Lines{}, err
		}
		n, rerr := file.Read(buf)
		if n > 0 {
			b := buf[:n]
			if size < binarySniff {
				if i := bytes.IndexByte(b[:min(int64(n), binarySniff-size)], 0); i >= 0 {
					return Lines{}, errs.New(errs.Precondition, "%s looks like a binary file (NUL byte at offset %d); use Read to get its bytes", p, size+int64(i))
				}
			}
			h.Write(b)
			size += int64(n)
			ls.feed(b)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return Lines{}, f.pathError(p, rerr)
		}
	}
	res := ls.finish()
	res.Size = size
	res.SHA256 = hex.EncodeToString(h.Sum(nil))
	if from > max(res.Total, 1) {
		return Lines{}, errs.New(errs.Invalid, "from_line %d is past the end of %s: it has %s", from, p, plural(int(res.Total), "line", "lines"))
	}
	return res, nil
}

// lineSplitter splits a stream of bytes into lines, keeping those in
// [from, end) (cut to maxLen) and counting all of them.
type lineSplitter struct {
	from, end int64
	maxLen    int
	res       Lines

	line     int64  // number of the line being read, 1-based
	open     bool   // the line being read has bytes
	cur      []byte // kept bytes of the line being read (at most maxLen+utf8.UTFMax)
	curLen   int    // all bytes of the line being read
	last     byte   // last byte of the line being read
	budget   int    // text bytes left to return
	stopped  bool   // the budget ran out: keep counting, collect no more
	inited   bool
	newlines int64
}

func (s *lineSplitter) collecting() bool {
	return !s.stopped && s.line >= s.from && s.line < s.end
}

func (s *lineSplitter) feed(b []byte) {
	if !s.inited {
		s.line, s.budget, s.inited = 1, MaxLinesBytes, true
	}
	for len(b) > 0 {
		if !s.collecting() {
			if s.stopped || s.line >= s.end {
				// Past the range: count what is left.
				n := int64(bytes.Count(b, []byte{'\n'}))
				s.line += n
				s.newlines += n
				s.open = b[len(b)-1] != '\n'
				return
			}
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				s.open = true
				return
			}
			s.line++
			s.newlines++
			s.open = false
			b = b[i+1:]
			continue
		}
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if keep := s.maxLen + utf8.UTFMax - len(s.cur); keep > 0 {
			s.cur = append(s.cur, seg[:min(keep, len(seg))]...)
		}
		if len(seg) > 0 {
			s.last = seg[len(seg)-1]
		}
		s.curLen += len(seg)
		s.open = true
		if i < 0 {
			return
		}
		s.newlines++
		s.endLine()
		b = b[i+1:]
	}
}

// endLine adds the line being read (which is in the range) to the result.
func (s *lineSplitter) endLine() {
	n := s.curLen
	kept := s.cur
	if n > 0 && s.last == '\r' {
		n--
		if len(kept) > n {
			kept = kept[:n]
		}
	}
	var text string
	if n > s.maxLen {
		cut := s.maxLen
		for cut > 0 && cut < len(kept) && !utf8.RuneStart(kept[cut]) {
			cut--
		}
		text = strings.ToValidUTF8(string(kept[:cut]), "\uFFFD") + fmt.Sprintf("… [line truncated, %d more bytes]", n-cut)
	} else {
		text = strings.ToValidUTF8(string(kept[:n]), "\uFFFD")
	}
	if len(text) > s.budget && len(s.res.Lines) > 0 {
		s.stopped = true
	} else {
		s.budget -= len(text)
		s.res.Lines = append(s.res.Lines, text)
		if n > s.maxLen {
			s.res.Cut = append(s.res.Cut, s.line)
		}
	}
	s.line++
	s.cur, s.curLen, s.last, s.open = s.cur[:0], 0, 0, false
}

func (s *lineSplitter) finish() Lines {
	if !s.inited {
		s.line = 1
	}
	total := s.newlines
	if s.open {
		total++
		if s.collecting() {
			s.endLine()
		}
	}
	s.res.Total = total
	last := s.res.From + int64(len(s.res.Lines)) - 1
	s.res.More = last < total
	return s.res
}
