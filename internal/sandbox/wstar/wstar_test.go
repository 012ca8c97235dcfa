package wstar

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tarWriter writes small test streams.
type tarWriter struct {
	tw *tar.Writer
	t  time.Time
}

func newTar(w io.Writer) *tarWriter {
	return &tarWriter{tw: tar.NewWriter(w), t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (w *tarWriter) add(h *tar.Header, data string) {
	h.ModTime, h.Size = w.t, int64(len(data))
	_ = w.tw.WriteHeader(h)
	_, _ = w.tw.Write([]byte(data))
}

func (w *tarWriter) symlink(name, target string) {
	w.add(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}, "")
}

func (w *tarWriter) file(name, data string) {
	w.add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, data)
}

func (w *tarWriter) close() { _ = w.tw.Close() }

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// A workspace stream cannot lead the import (run by a root hub) out of
// the workspace: an entry under a symlink that points out of it fails,
// and nothing is written outside.
func TestExtractStaysInRoot(t *testing.T) {
	t.Parallel()
	ws, outside := t.TempDir(), t.TempDir()
	root := openRoot(t, ws)
	for _, tc := range []struct{ name, link string }{
		{"absolute", outside},
		{"relative", "../" + filepath.Base(outside)},
	} {
		var buf bytes.Buffer
		tw := newTar(&buf)
		tw.symlink("out-"+tc.name, tc.link)
		tw.file("out-"+tc.name+"/pwned", "x")
		tw.close()
		err := Extract(root, &buf, 1000, 1000)
		if err == nil {
			t.Errorf("%s: import through a symlink out of the workspace: nil error", tc.name)
		}
		if _, serr := os.Stat(filepath.Join(outside, "pwned")); serr == nil {
			t.Errorf("%s: the import wrote outside the workspace (%v)", tc.name, err)
		}
	}
}

// entry is what the round trip compares of a file.
type entry struct {
	Mode    fs.FileMode
	ModTime time.Time
	Data    string // content, symlink target
}

func tree(t *testing.T, dir string) map[string]entry {
	t.Helper()
	got := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode(), ModTime: fi.ModTime().UTC()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Data, _ = os.Readlink(p)
			e.ModTime = time.Time{}
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			e.Data = string(b)
		}
		got[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Export then Extract gives back the tree: types, modes with the setuid,
// setgid and sticky bits, times (directories' too), contents, symlink
// targets; a fifo is left out.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	mt := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a/b"), 0o755))
	must(os.WriteFile(filepath.Join(src, "a/b/f"), []byte("hello"), 0o644))
	must(os.WriteFile(filepath.Join(src, "a/x"), bytes.Repeat([]byte{0, 0xff}, 70000), 0o600))
	must(os.Symlink("b/f", filepath.Join(src, "a/l")))
	must(os.Chmod(filepath.Join(src, "a/x"), 0o4755))
	must(os.Chmod(filepath.Join(src, "a/b"), 0o2750|fs.ModeSticky))
	for _, p := range []string{"a/b/f", "a/x", "a/b", "a"} {
		must(os.Chtimes(filepath.Join(src, p), mt, mt))
	}
	want := tree(t, src)
	must(mkfifo(filepath.Join(src, "fifo")))

	var buf bytes.Buffer
	must(Export(openRoot(t, src), &buf))
	must(Extract(openRoot(t, dst), &buf, os.Getuid(), os.Getgid()))
	if diff := cmp.Diff(tree(t, dst), want); diff != "" {
		t.Errorf("the extracted tree (-got +want):\n%s", diff)
	}
}

// What Extract and Own refuse: names that climb out or are absolute,
// entry types other than directory, file and symlink, and a stream cut
// before the tar's end marker (cut at an entry's end too).
func TestRefused(t *testing.T) {
	t.Parallel()
	stream := func(f func(*tarWriter)) []byte {
		var buf bytes.Buffer
		tw := newTar(&buf)
		f(tw)
		tw.close()
		return buf.Bytes()
	}
	whole := stream(func(w *tarWriter) { w.file("a", "x"); w.file("b", "y") })
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"dot-dot", stream(func(w *tarWriter) { w.file("../a", "x") })},
		{"absolute", stream(func(w *tarWriter) { w.file("/a", "x") })},
		{"device", stream(func(w *tarWriter) {
			w.add(&tar.Header{Typeflag: tar.TypeChar, Name: "null", Mode: 0o666, Devmajor: 1, Devminor: 3}, "")
		})},
		{"hard link", stream(func(w *tarWriter) {
			w.file("a", "x")
			w.add(&tar.Header{Typeflag: tar.TypeLink, Name: "b", Linkname: "a"}, "")
		})},
		{"cut", whole[:len(whole)-1024]},
	} {
		if err := Extract(openRoot(t, t.TempDir()), bytes.NewReader(tc.data), 1000, 1000); err == nil {
			t.Errorf("Extract %s: nil error", tc.name)
		}
		if err := Own(bytes.NewReader(tc.data), io.Discard, 1000, 1000); err == nil {
			t.Errorf("Own %s: nil error", tc.name)
		}
	}
}

// Own passes a clean stream on with clean names and every entry uid and
// gid's.
func TestOwn(t *testing.T) {
	t.Parallel()
	var in, out bytes.Buffer
	tw := newTar(&in)
	tw.add(&tar.Header{Typeflag: tar.TypeDir, Name: "./d/", Mode: 0o755, Uid: 0}, "")
	tw.add(&tar.Header{Typeflag: tar.TypeReg, Name: "d//f", Mode: 0o4640, Uid: 0, Uname: "root"}, "data")
	tw.symlink("l", "/etc/passwd") // a symlink may point anywhere: it is the sandbox's
	tw.close()
	if err := Own(&in, &out, 1000, 1001); err != nil {
		t.Fatal(err)
	}
	type hdr struct {
		Type       byte
		Name, Link string
		Mode       int64
		UID, GID   int
		Uname      string
		Data       string
	}
	var got []hdr
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got = append(got, hdr{h.Typeflag, h.Name, h.Linkname, h.Mode, h.Uid, h.Gid, h.Uname, string(b)})
	}
	want := []hdr{
		{Type: tar.TypeDir, Name: "d/", Mode: 0o755, UID: 1000, GID: 1001},
		{Type: tar.TypeReg, Name: "d/f", Mode: 0o4640, UID: 1000, GID: 1001, Data: "data"},
		{Type: tar.TypeSymlink, Name: "l", Link: "/etc/passwd", Mode: 0o777, UID: 1000, GID: 1001},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("Own's stream (-got +want):\n%s", diff)
	}
}
