//go:build unix

// Unix only: uses fifos, uids and unix file modes. The package is
// cross-compiled for Windows, but its tests do not run there.

package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// readAll reads through Read and checks the chunking rules on the way.
func readAll(t *testing.T, f *FS, path string, offset, limit int64) ([]byte, *Entry, error) {
	t.Helper()
	var out []byte
	var info *Entry
	calls := 0
	err := f.Read(t.Context(), path, offset, limit, func(c ReadChunk) error {
		if calls == 0 && c.Info == nil {
			t.Error("first chunk has no Info")
		}
		if calls > 0 && c.Info != nil {
			t.Error("a later chunk has Info")
		}
		if len(c.Data) > ChunkSize {
			t.Errorf("chunk of %d bytes, more than %d", len(c.Data), ChunkSize)
		}
		if want := offset + int64(len(out)); c.Offset != want {
			t.Errorf("chunk offset %d, want %d", c.Offset, want)
		}
		if c.Info != nil {
			info = c.Info
		}
		out = append(out, c.Data...)
		calls++
		return nil
	})
	return out, info, err
}

func TestRead(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	big := make([]byte, 3*ChunkSize+123)
	for i := range big {
		big[i] = byte(rand.IntN(256)) // binary, NULs included
	}
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"empty": "", "small": "hello world", "link": "->small", "dir/": "", "dangling": "->nope"})

	tests := []struct {
		name          string
		path          string
		offset, limit int64
		want          []byte
	}{
		{"whole", "big.bin", 0, 0, big},
		{"offset", "big.bin", ChunkSize + 7, 0, big[ChunkSize+7:]},
		{"range", "big.bin", 5, ChunkSize + 10, big[5 : ChunkSize+15]},
		{"limit past end", "small", 6, 100, []byte("world")},
		{"offset past end", "small", 100, 0, nil},
		{"empty", "empty", 0, 0, nil},
		{"through symlink", "link", 0, 5, []byte("hello")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, info, err := readAll(t, f, tc.path, tc.offset, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got %d bytes, want %d (equal: false)", len(got), len(tc.want))
			}
			if info == nil || info.Path != filepath.Join(ws, tc.path) || info.Type != TypeFile {
				t.Errorf("Info = %+v", info)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		_, _, err := readAll(t, f, "dir", 0, 0)
		wantKind(t, err, errs.Precondition, "is a directory", "List")
		_, _, err = readAll(t, f, "missing", 0, 0)
		wantKind(t, err, errs.NotFound, "missing does not exist")
		_, _, err = readAll(t, f, "dangling", 0, 0)
		wantKind(t, err, errs.NotFound, "symlink to nope, which does not exist")
		_, _, err = readAll(t, f, "small", -1, 0)
		wantKind(t, err, errs.Invalid, "offset -1 is negative")
		_, _, err = readAll(t, f, "small", 0, -5)
		wantKind(t, err, errs.Invalid, "limit -5 is negative")
		if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err = readAll(t, f, "fifo", 0, 0)
		wantKind(t, err, errs.Precondition, "not a regular file")
	})

	t.Run("emit error stops", func(t *testing.T) {
		t.Parallel()
		stop := errors.New("stop")
		calls := 0
		err := f.Read(t.Context(), "big.bin", 0, 0, func(ReadChunk) error { calls++; return stop })
		if err != stop || calls != 1 {
			t.Errorf("Read = %v after %d calls, want the emit error after 1", err, calls)
		}
	})
}

func TestReadLines(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	long := strings.Repeat("é", 1500) // 3000 bytes
	writeFiles(t, ws, map[string]string{
		"ten":      "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n",
		"nonl":     "a\nb",
		"empty":    "",
		"crlf":     "one\r\ntwo\r\n",
		"long":     "short\n" + long + "\nend\n",
		"badutf8":  "ok\n\xff\xfebad\n",
		"blank":    "\n\n\n",
		"binary":   "text\x00more",
		"late-nul": strings.Repeat("x", 9000) + "\x00",
		"dir/":     "",
	})
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

	tests := []struct {
		name string
		path string
		opts LinesOptions
		want Lines
	}{
		{"all", "ten", LinesOptions{}, Lines{Lines: strings.Fields("1 2 3 4 5 6 7 8 9 10"), From: 1, Total: 10, Size: 21}},
		{"middle", "ten", LinesOptions{From: 4, Count: 3}, Lines{Lines: []string{"4", "5", "6"}, From: 4, Total: 10, More: true, Size: 21}},
		{"tail", "ten", LinesOptions{From: 9, Count: 5}, Lines{Lines: []string{"9", "10"}, From: 9, Total: 10, Size: 21}},
		{"no final newline", "nonl", LinesOptions{}, Lines{Lines: []string{"a", "b"}, From: 1, Total: 2, Size: 3}},
		{"empty", "empty", LinesOptions{}, Lines{From: 1, Size: 0}},
		{"crlf", "crlf", LinesOptions{}, Lines{Lines: []string{"one", "two"}, From: 1, Total: 2, Size: 10}},
		{"long line cut", "long", LinesOptions{MaxLineLen: 11}, Lines{
			Lines: []string{"short", "ééééé… [line truncated, 2990 more bytes]", "end"}, From: 1, Total: 3, Cut: []int64{2}, Size: 3011}},
		{"invalid utf8", "badutf8", LinesOptions{}, Lines{Lines: []string{"ok", "\uFFFDbad"}, From: 1, Total: 2, Size: 9}},
		{"blank lines", "blank", LinesOptions{From: 2}, Lines{Lines: []string{"", ""}, From: 2, Total: 3, Size: 3}},
		{"nul past the sniff", "late-nul", LinesOptions{MaxLineLen: 5}, Lines{
			Lines: []string{"xxxxx… [line truncated, 8996 more bytes]"}, From: 1, Total: 1, Cut: []int64{1}, Size: 9001}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := f.ReadLines(t.Context(), tc.path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Path = filepath.Join(ws, tc.path)
			tc.want.SHA256 = sum(readFile(t, tc.want.Path))
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("ReadLines (-got +want):\n%s", diff)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		_, err := f.ReadLines(t.Context(), "binary", LinesOptions{})
		wantKind(t, err, errs.Precondition, "binary", "offset 4", "use Read")
		_, err = f.ReadLines(t.Context(), "ten", LinesOptions{From: 12})
		wantKind(t, err, errs.Invalid, "past the end", "10 lines")
		_, err = f.ReadLines(t.Context(), "ten", LinesOptions{From: -1})
		wantKind(t, err, errs.Invalid, "negative")
		_, err = f.ReadLines(t.Context(), "ten", LinesOptions{Count: MaxLineCount + 1})
		wantKind(t, err, errs.Invalid, "count")
		_, err = f.ReadLines(t.Context(), "ten", LinesOptions{MaxLineLen: -3})
		wantKind(t, err, errs.Invalid, "max_line_length")
		_, err = f.ReadLines(t.Context(), "dir", LinesOptions{})
		wantKind(t, err, errs.Precondition, "is a directory")
		_, err = f.ReadLines(t.Context(), "nope", LinesOptions{})
		wantKind(t, err, errs.NotFound)
	})

	t.Run("budget", func(t *testing.T) {
		t.Parallel()
		// 3000 lines of 1000 bytes: the 2 MiB budget stops before the end.
		line := strings.Repeat("y", 999) + "\n"
		p := filepath.Join(ws, "huge")
		if err := os.WriteFile(p, []byte(strings.Repeat(line, 3000)), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := f.ReadLines(t.Context(), p, LinesOptions{Count: 5000, MaxLineLen: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.Lines); n != MaxLinesBytes/999 || !got.More || got.Total != 3000 {
			t.Errorf("got %d lines, More %v, Total %d; want %d, true, 3000", n, got.More, got.Total, MaxLinesBytes/999)
		}
	})
}

// TestLineSplitterChunks feeds the same text in chunks of every size and
// checks that the result does not depend on where the chunks end.
func TestLineSplitterChunks(t *testing.T) {
	t.Parallel()
	text := "alpha\r\n\nbeta is a longer line\nγάμμα\n\nlast without newline"
	for _, opts := range []struct{ from, count int64 }{{1, 100}, {2, 3}, {5, 1}, {6, 10}} {
		want := split(text, opts.from, opts.count, 8, 1)
		for size := 2; size <= len(text); size++ {
			if got := split(text, opts.from, opts.count, 8, size); !cmp.Equal(got, want) {
				t.Fatalf("from %d count %d, chunks of %d: (-got +want)\n%s", opts.from, opts.count, size, cmp.Diff(got, want))
			}
		}
	}
}

func split(text string, from, count int64, maxLen, chunk int) Lines {
	s := lineSplitter{from: from, end: from + count, maxLen: maxLen, res: Lines{From: from}}
	for i := 0; i < len(text); i += chunk {
		s.feed([]byte(text[i:min(i+chunk, len(text))]))
	}
	return s.finish()
}
