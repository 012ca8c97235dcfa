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
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func fileMode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string]string
		modes   map[string]fs.FileMode
		path    string
		opts    WriteOptions
		content string
		kind    errs.Kind // 0: success
		msg     string
		// On success: the file's content and mode afterwards, and Created.
		want     string
		wantMode fs.FileMode
		created  bool
	}{
		{name: "new file", path: "new.txt", content: "hi", want: "hi", wantMode: 0o644, created: true},
		{name: "new file with mode", path: "run.sh", opts: WriteOptions{Mode: 0o755}, content: "#!", want: "#!", wantMode: 0o755, created: true},
		{name: "replace keeps mode", files: map[string]string{"f": "old"}, modes: map[string]fs.FileMode{"f": 0o600},
			path: "f", content: "new", want: "new", wantMode: 0o600},
		{name: "replace keeps special bits", files: map[string]string{"f": "old"}, modes: map[string]fs.FileMode{"f": 0o755 | fs.ModeSetgid},
			path: "f", content: "new", want: "new", wantMode: 0o755 | fs.ModeSetgid},
		{name: "replace with mode", files: map[string]string{"f": "old"}, path: "f", opts: WriteOptions{Mode: 0o640}, content: "new", want: "new", wantMode: 0o640},
		{name: "empty content", files: map[string]string{"f": "old"}, path: "f", content: "", want: "", wantMode: 0o644},
		{name: "append", files: map[string]string{"f": "old\n"}, path: "f", opts: WriteOptions{Append: true}, content: "more\n", want: "old\nmore\n", wantMode: 0o644},
		{name: "append creates", path: "f", opts: WriteOptions{Append: true}, content: "x", want: "x", wantMode: 0o644, created: true},
		{name: "expected matches", files: map[string]string{"f": "old"}, path: "f", opts: WriteOptions{ExpectedSHA256: sha("old")}, content: "new", want: "new", wantMode: 0o644},
		{name: "expected upper case", files: map[string]string{"f": "old"}, path: "f", opts: WriteOptions{ExpectedSHA256: strings.ToUpper(sha("old"))}, content: "new", want: "new", wantMode: 0o644},
		{name: "expected absent", path: "f", opts: WriteOptions{ExpectedSHA256: Absent}, content: "new", want: "new", wantMode: 0o644, created: true},
		{name: "create parents", path: "a/b/c.txt", opts: WriteOptions{CreateParents: true}, content: "deep", want: "deep", wantMode: 0o644, created: true},

		{name: "expected mismatch", files: map[string]string{"f": "old"}, path: "f", opts: WriteOptions{ExpectedSHA256: sha("other")}, content: "new",
			kind: errs.Precondition, msg: "has changed: its sha256 is " + sha("old")},
		{name: "expected absent but exists", files: map[string]string{"f": "old"}, path: "f", opts: WriteOptions{ExpectedSHA256: Absent}, content: "new",
			kind: errs.Precondition, msg: "must be absent"},
		{name: "expected but missing", path: "f", opts: WriteOptions{ExpectedSHA256: sha("x")}, content: "new",
			kind: errs.Precondition, msg: `does not exist, but expected_sha256`},
		{name: "expected malformed", path: "f", opts: WriteOptions{ExpectedSHA256: "abc"}, content: "new", kind: errs.Invalid, msg: "not a hex sha256"},
		{name: "missing parent", path: "no/f", content: "x", kind: errs.NotFound, msg: "set create_parents"},
		{name: "parent is a file", files: map[string]string{"p": "x"}, path: "p/f", opts: WriteOptions{CreateParents: true}, content: "x",
			kind: errs.Precondition, msg: "not a directory"},
		{name: "deeper parent is a file", files: map[string]string{"p": "x"}, path: "p/q/f", opts: WriteOptions{CreateParents: true}, content: "x",
			kind: errs.Precondition, msg: "is a file"},
		{name: "directory", files: map[string]string{"d/": ""}, path: "d", content: "x", kind: errs.Precondition, msg: "is a directory"},
		{name: "bad mode", path: "f", opts: WriteOptions{Mode: fs.ModeDir | 0o755}, content: "x", kind: errs.Invalid, msg: "mode"},
		{name: "nul in path", path: "f\x00", content: "x", kind: errs.Invalid, msg: "NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, ws := newTestFS(t)
			writeFiles(t, ws, tc.files)
			for name, m := range tc.modes {
				if err := os.Chmod(filepath.Join(ws, name), m); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, ws)
			res, err := f.Write(t.Context(), tc.path, tc.opts, strings.NewReader(tc.content))
			if tc.kind != 0 {
				wantKind(t, err, tc.kind, tc.msg)
				if diff := cmp.Diff(snapshot(t, ws), before); diff != "" {
					t.Errorf("a failed write changed the tree (-got +want):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(ws, tc.path)
			want := WriteResult{Path: p, Size: int64(len(tc.want)), SHA256: sha(tc.want), Created: tc.created}
			if diff := cmp.Diff(res, want); diff != "" {
				t.Errorf("Write (-got +want):\n%s", diff)
			}
			if got := readFile(t, p); got != tc.want {
				t.Errorf("content %q, want %q", got, tc.want)
			}
			if got := fileMode(t, p) & modeBits; got != tc.wantMode {
				t.Errorf("mode %v, want %v", got, tc.wantMode)
			}
			assertNoTemp(t, ws)
		})
	}
}

// snapshot maps every path below dir to its content (or "<dir>").
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			out[rel] = "<dir>"
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertNoTemp fails if a temporary file of agentd is left below dir.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".agentd-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// TestWriteLarge writes files several writeback chunks long (the kernel is
// asked to start writing them early): new, replacing, appended, and one
// whose reader fails past the first chunk, which leaves the file as it was.
func TestWriteLarge(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	big := make([]byte, 2*writebackChunk+12345)
	for i := range big {
		big[i] = byte(i*7 + i>>13)
	}
	check := func(name string, want []byte, res WriteResult) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(want)
		if !bytes.Equal(got, want) || res.Size != int64(len(want)) || res.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: %d bytes on disk (equal: %v), result %d bytes sha %s; want %d bytes",
				name, len(got), bytes.Equal(got, want), res.Size, res.SHA256, len(want))
		}
	}
	res, err := f.Write(t.Context(), "big", WriteOptions{}, bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	check("big", big, res)
	rev := bytes.Clone(big)
	slices.Reverse(rev)
	if res, err = f.Write(t.Context(), "big", WriteOptions{}, bytes.NewReader(rev)); err != nil {
		t.Fatal(err)
	}
	check("big", rev, res)
	if res, err = f.Write(t.Context(), "big", WriteOptions{Append: true}, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	check("big", append(bytes.Clone(rev), big...), res)
	if res, err = f.Write(t.Context(), "chunked", WriteOptions{}, &chunkSource{data: big, size: 32<<10 - 64}); err != nil {
		t.Fatal(err)
	}
	check("chunked", big, res)

	writeFiles(t, ws, map[string]string{"small": "original"})
	_, err = f.Write(t.Context(), "small", WriteOptions{}, &errReader{data: big, err: errClientGone})
	if err == nil || !strings.Contains(err.Error(), "unchanged") {
		t.Fatalf("Write with a reader failing after %d bytes: %v", len(big), err)
	}
	if got := readFile(t, filepath.Join(ws, "small")); got != "original" {
		t.Errorf("content %q after a failed large write", got)
	}
	assertNoTemp(t, ws)
}

// TestWriteReplaceLargeFile replaces a file large enough for its blocks to
// be freed after the write returns: the new content is in place when Write
// returns, and once Wait returns no descriptor of the old file is left
// open. Not parallel: it counts this process's open descriptors.
func TestWriteReplaceLargeFile(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd here")
		}
		return len(ents)
	}
	f, ws := newTestFS(t)
	old := bytes.Repeat([]byte("old "), releaseLater/4+1)
	if err := os.WriteFile(filepath.Join(ws, "big"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	before := fds()
	want := bytes.Repeat([]byte("new!"), releaseLater/4+100)
	if _, err := f.Write(t.Context(), "big", WriteOptions{}, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ws, "big")); got != string(want) {
		t.Fatalf("after Write returned, big holds %d bytes starting %q", len(got), got[:min(len(got), 8)])
	}
	f.Wait()
	if after := fds(); after != before {
		t.Errorf("%d descriptors open after Wait, %d before the write", after, before)
	}
	assertNoTemp(t, ws)
}

// chunkSource is a ChunkReader handing out copies of data, size bytes at
// a time (as the Write stream hands out its messages).
type chunkSource struct {
	data []byte
	size int
}

func (c *chunkSource) ReadChunk() ([]byte, error) {
	if len(c.data) == 0 {
		return nil, io.EOF
	}
	n := min(c.size, len(c.data))
	b := bytes.Clone(c.data[:n])
	c.data = c.data[n:]
	return b, nil
}

func (c *chunkSource) Read([]byte) (int, error) {
	return 0, errors.New("Write should use ReadChunk")
}

func TestWriteFailingReader(t *testing.T) {
	t.Parallel()
	for _, opts := range []WriteOptions{{}, {Append: true}, {CreateParents: true}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			t.Parallel()
			f, ws := newTestFS(t)
			writeFiles(t, ws, map[string]string{"f": "original"})
			before := snapshot(t, ws)
			r := &errReader{data: bytes.Repeat([]byte("x"), 1<<20), err: errClientGone}
			path := "f"
			if opts.CreateParents {
				path = "new/dirs/f"
			}
			_, err := f.Write(t.Context(), path, opts, r)
			if err == nil || !strings.Contains(err.Error(), "unchanged") || !strings.Contains(err.Error(), errClientGone.Error()) {
				t.Fatalf("Write with a failing reader: %v", err)
			}
			if diff := cmp.Diff(snapshot(t, ws), before); diff != "" {
				t.Errorf("tree changed (-got +want):\n%s", diff)
			}
		})
	}
}

// cancelReader cancels ctx once half of its data has been read.
type cancelReader struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if c.n > 1<<20 {
		c.cancel()
	}
	return n, err
}

func TestWriteCancelled(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"f": "original"})
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelReader{r: bytes.NewReader(make([]byte, 4<<20)), cancel: cancel}
	_, err := f.Write(ctx, "f", WriteOptions{}, r)
	wantKind(t, err, errs.Canceled, "unchanged")
	if got := readFile(t, filepath.Join(ws, "f")); got != "original" {
		t.Errorf("content %q after a cancelled write", got)
	}
	assertNoTemp(t, ws)
}

func TestWriteSymlink(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"real/target": "old", "link": "->real/target", "chain": "->link", "dangling": "->real/new", "loop": "->loop"})
	if _, err := f.Write(t.Context(), "chain", WriteOptions{}, strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ws, "real/target")); got != "new" {
		t.Errorf("target = %q, want %q", got, "new")
	}
	for _, l := range []string{"link", "chain"} {
		if fileMode(t, filepath.Join(ws, l))&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink", l)
		}
	}
	res, err := f.Write(t.Context(), "dangling", WriteOptions{}, strings.NewReader("created"))
	if err != nil || !res.Created {
		t.Fatalf("write through a dangling link = %+v, %v", res, err)
	}
	if got := readFile(t, filepath.Join(ws, "real/new")); got != "created" {
		t.Errorf("dangling link's target = %q", got)
	}
	_, err = f.Write(t.Context(), "loop", WriteOptions{}, strings.NewReader("x"))
	wantKind(t, err, errs.Precondition, "too many levels of symbolic links")
	assertNoTemp(t, ws)
}

// TestWriteConcurrent races writers on one file: every one succeeds, the
// file ends up holding exactly one of their contents, never a mix.
func TestWriteConcurrent(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	var wg sync.WaitGroup
	contents := map[string]bool{}
	for i := range 16 {
		c := strings.Repeat(fmt.Sprintf("writer %02d\n", i), 20000)
		contents[c] = true
		wg.Go(func() {
			if _, err := f.Write(t.Context(), "shared", WriteOptions{}, strings.NewReader(c)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := readFile(t, filepath.Join(ws, "shared")); !contents[got] {
		t.Errorf("final content (%d bytes) is none of the writers' contents", len(got))
	}
	assertNoTemp(t, ws)
}

// TestWriteDiskFull writes more than a tiny tmpfs holds.
func TestWriteDiskFull(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	mountTmpfs(t, ws, "64k")
	writeFiles(t, ws, map[string]string{"keep.txt": "precious"})
	before := snapshot(t, ws)

	for _, opts := range []WriteOptions{{}, {Append: true}} {
		_, err := f.Write(t.Context(), "keep.txt", opts, bytes.NewReader(make([]byte, 1<<20)))
		wantKind(t, err, errs.Exhausted, "no space left", "unchanged")
		if diff := cmp.Diff(snapshot(t, ws), before); diff != "" {
			t.Errorf("disk full changed the tree (-got +want):\n%s", diff)
		}
	}
	// Space is free again: a small write works.
	if _, err := f.Write(t.Context(), "keep.txt", WriteOptions{}, strings.NewReader("fits")); err != nil {
		t.Errorf("small write after a failed one: %v", err)
	}
}

// TestWriteReadOnlyFS writes on a read-only mount.
func TestWriteReadOnlyFS(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	mountTmpfs(t, ws, "64k", "ro")
	_, err := f.Write(t.Context(), "x", WriteOptions{}, strings.NewReader("x"))
	wantKind(t, err, errs.Permission, "read-only file system")
}
