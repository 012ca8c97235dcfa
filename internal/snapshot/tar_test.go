package snapshot

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	os.Remove(filepath.Join(root, "link-abs")) // Import refuses links out of the archive
	// Whole seconds: a tar (ustar) keeps no more.
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeSymlink == 0 {
			sec := time.Unix(time.Now().Unix()-3600, 0)
			err = os.Chtimes(p, sec, sec)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := describe(t, root, true)
	snap, err := s.Create(t.Context(), root, nil, "orig", nil)
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := s.Export(t.Context(), snap.ID, &archive); err != nil {
		t.Fatal(err)
	}

	// The archive is an ordinary tar.
	tr := tar.NewReader(bytes.NewReader(archive.Bytes()))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if len(names) != int(snap.Files+snap.Dirs+snap.Symlinks) || names[0] != "a.txt" || !containsString(names, "empty/") {
		t.Errorf("archive entries: %q", names)
	}

	// Into another store, then restored: the same tree.
	s2 := newTestStore(t, Options{})
	imported, err := s2.Import(t.Context(), bytes.NewReader(archive.Bytes()), "copy", "/somewhere/else")
	if err != nil {
		t.Fatal(err)
	}
	if imported.Files != snap.Files || imported.Dirs != snap.Dirs || imported.Symlinks != snap.Symlinks ||
		imported.TotalBytes != snap.TotalBytes || imported.Root != "/somewhere/else" || imported.Label != "copy" {
		t.Errorf("imported %+v\nfrom %+v", imported, snap)
	}
	_, e1, _ := s.Get(t.Context(), snap.ID)
	_, e2, _ := s2.Get(t.Context(), imported.ID)
	if d := cmp.Diff(e2, e1, cmp.Comparer(func(a, b Entry) bool {
		return a.Path == b.Path && a.Type == b.Type && a.Mode == b.Mode && a.Size == b.Size &&
			a.SHA256 == b.SHA256 && a.Target == b.Target && a.ModTime.Round(time.Second).Equal(b.ModTime.Round(time.Second))
	})); d != "" {
		t.Errorf("imported entries (-got +want):\n%s", d)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := s2.Restore(t.Context(), imported.ID, out, false, nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(describe(t, out, true), want); d != "" {
		t.Errorf("restored import (-got +want):\n%s", d)
	}

	// Into the same store: nothing new stored.
	again, err := s.Import(t.Context(), bytes.NewReader(archive.Bytes()), "", root)
	if err != nil {
		t.Fatal(err)
	}
	if again.StoredBytes != 0 {
		t.Errorf("re-import stored %d bytes", again.StoredBytes)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tarEntry is one entry of a hand-made archive.
type tarEntry struct {
	name, body, link string
	typ              byte
}

func makeTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(1e9, 0)}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImportRefusesMaliciousArchives(t *testing.T) {
	t.Parallel()
	// Each archive starts with good files, small and large, so that the
	// refusal has blobs to take back.
	good := []tarEntry{
		{name: "ok/", typ: tar.TypeDir},
		{name: "ok/file.txt", body: "fine", typ: tar.TypeReg},
		{name: "ok/big.bin", body: bigContent(7, 2<<20), typ: tar.TypeReg},
	}
	tests := []struct {
		name    string
		entries []tarEntry
		msg     string
	}{
		{"dot-dot", []tarEntry{{name: "../evil", body: "x", typ: tar.TypeReg}}, `climbs out of the archive`},
		{"dot-dot inside", []tarEntry{{name: "ok/../../evil", body: "x", typ: tar.TypeReg}}, `climbs out`},
		{"absolute path", []tarEntry{{name: "/etc/cron.d/evil", body: "x", typ: tar.TypeReg}}, `absolute path`},
		{"absolute symlink", []tarEntry{{name: "ok/passwd", link: "/etc/passwd", typ: tar.TypeSymlink}}, `outside the archive`},
		{"escaping symlink", []tarEntry{{name: "ok/up", link: "../../..", typ: tar.TypeSymlink}}, `outside the archive`},
		{"symlink then a file through it", []tarEntry{
			{name: "ok/link", link: "../..", typ: tar.TypeSymlink},
			{name: "ok/link/etc/passwd", body: "root::0:0::/:/bin/sh", typ: tar.TypeReg},
		}, `lies below "ok/link", which is a symlink`},
		{"file through an inside symlink", []tarEntry{
			{name: "ok/inner", link: "file.txt", typ: tar.TypeSymlink},
			{name: "ok/inner/x", body: "x", typ: tar.TypeReg},
		}, `which is a symlink`},
		{"escape through a chain of symlinks", []tarEntry{
			{name: "ok/here", link: ".", typ: tar.TypeSymlink},
			{name: "ok/away", link: "here/../..", typ: tar.TypeSymlink},
		}, `"ok/away" points to "here/../..", outside the archive`},
		{"escaping hard link", []tarEntry{{name: "ok/shadow", link: "../../etc/shadow", typ: tar.TypeLink}}, `outside the archive`},
		{"absolute hard link", []tarEntry{{name: "ok/shadow", link: "/etc/shadow", typ: tar.TypeLink}}, `outside the archive`},
		{"hard link to nothing", []tarEntry{{name: "ok/ghost", link: "ok/missing", typ: tar.TypeLink}}, `not an earlier file`},
		{"file below a file", []tarEntry{{name: "ok/file.txt/x", body: "x", typ: tar.TypeReg}}, `which is a file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newTestStore(t, Options{})
			archive := makeTar(t, append(append([]tarEntry(nil), good...), tt.entries...)...)
			_, err := s.Import(t.Context(), bytes.NewReader(archive), "", "/tmp/x")
			if err == nil {
				t.Fatal("imported")
			}
			if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), "nothing was stored") {
				t.Errorf("err = %v (kind %v); want Invalid saying %q", err, errs.KindOf(err), tt.msg)
			}
			assertEmptyStore(t, s)
		})
	}
}

func TestImportBadStreams(t *testing.T) {
	t.Parallel()
	good := makeTar(t, tarEntry{name: "a.txt", body: strings.Repeat("a", 5000), typ: tar.TypeReg})
	two := makeTar(t, tarEntry{name: "a.txt", body: strings.Repeat("a", 5000), typ: tar.TypeReg},
		tarEntry{name: "b.txt", body: "b", typ: tar.TypeReg})
	tests := []struct {
		name string
		data []byte
		msg  string
	}{
		{"not a tar", []byte(strings.Repeat("this is not a tar archive\n", 40)), "not a valid tar archive"},
		{"gzip", append([]byte{0x1f, 0x8b, 8, 0}, make([]byte, 600)...), "not a valid tar archive"},
		{"truncated", good[:1000], "ends in the middle of an entry"},
		// Cut right after a.txt (header and padded content: 512 +
		// 5120), before b.txt's header: archive/tar alone calls that a
		// clean end.
		{"cut between entries", two[:512+5120], "ends without its end marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newTestStore(t, Options{})
			_, err := s.Import(t.Context(), bytes.NewReader(tt.data), "", "/tmp/x")
			if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v; want Invalid saying %q", err, tt.msg)
			}
			assertEmptyStore(t, s)
		})
	}
	s := newTestStore(t, Options{})
	if _, err := s.Import(t.Context(), bytes.NewReader(good), "", "relative/root"); errs.KindOf(err) != errs.Invalid {
		t.Errorf("relative root: %v", err)
	}
	// An empty archive is an empty snapshot.
	snap, err := s.Import(t.Context(), bytes.NewReader(makeTar(t)), "", "/tmp/x")
	if err != nil || snap.Files != 0 {
		t.Errorf("empty archive: %+v, %v", snap, err)
	}
}

func TestImportAcceptsOrdinaryArchives(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	archive := makeTar(t,
		tarEntry{name: "./", typ: tar.TypeDir},
		tarEntry{name: "./src/main.go", body: "package main\n", typ: tar.TypeReg}, // parent implied
		tarEntry{name: "./src/same.go", link: "./src/main.go", typ: tar.TypeLink},
		tarEntry{name: "./src/up", link: "../README", typ: tar.TypeSymlink},
		tarEntry{name: "./README", body: "hi", typ: tar.TypeReg},
		tarEntry{name: "./README", body: "hi again", typ: tar.TypeReg}, // a later entry wins
		tarEntry{name: "./dev/null", typ: tar.TypeChar},
	)
	snap, err := s.Import(t.Context(), bytes.NewReader(archive), "", "/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	_, entries, _ := s.Get(t.Context(), snap.ID)
	var got []string
	for _, e := range entries {
		got = append(got, e.Type.String()+" "+e.Path)
	}
	want := []string{"file README", "directory src", "file src/main.go", "file src/same.go", "symlink src/up"}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("entries (-got +want):\n%s", d)
	}
	if d := cmp.Diff(snap.Skipped, []Skip{{Path: "dev/null", Reason: "device"}}); d != "" {
		t.Errorf("skipped (-got +want):\n%s", d)
	}
	if entries[0].SHA256 != hashBytes([]byte("hi again")) || entries[2].SHA256 != entries[3].SHA256 {
		t.Errorf("entries = %+v", entries)
	}
}

// FuzzImport feeds Import arbitrary bytes (seeded with archives of every
// kind it refuses and accepts). It must never panic; what it accepts must
// be a tree that can be restored without leaving the target; what it
// refuses must leave nothing behind.
func FuzzImport(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("not a tar"))
	seeds := [][]tarEntry{
		{{name: "a/", typ: tar.TypeDir}, {name: "a/b.txt", body: "hello", typ: tar.TypeReg}, {name: "a/l", link: "b.txt", typ: tar.TypeSymlink}},
		{{name: "../x", body: "x", typ: tar.TypeReg}},
		{{name: "l", link: "..", typ: tar.TypeSymlink}, {name: "l/x", body: "x", typ: tar.TypeReg}},
		{{name: "h", link: "../etc/passwd", typ: tar.TypeLink}},
		{{name: "f", body: "1", typ: tar.TypeReg}, {name: "g", link: "f", typ: tar.TypeLink}, {name: "s", link: "./f", typ: tar.TypeSymlink}},
		{{name: "d/here", link: ".", typ: tar.TypeSymlink}, {name: "d/away", link: "here/../..", typ: tar.TypeSymlink}},
	}
	for _, s := range seeds {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, e := range s {
			h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.link}
			if e.typ == tar.TypeReg {
				h.Size = int64(len(e.body))
			}
			tw.WriteHeader(h)
			tw.Write([]byte(e.body))
		}
		tw.Close()
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newTestStore(t, Options{Logger: zapNop()})
		snap, err := s.Import(t.Context(), bytes.NewReader(data), "", "/fuzz")
		if err != nil {
			if k := errs.KindOf(err); k != errs.Invalid && k != errs.Exhausted {
				t.Errorf("error of kind %v: %v", k, err)
			}
			assertEmptyStore(t, s)
			return
		}
		_, entries, err := s.Get(t.Context(), snap.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateEntries(entries); err != nil {
			t.Fatalf("accepted an unsafe tree: %v", err)
		}
		byPath := make(map[string]*Entry, len(entries))
		for i := range entries {
			byPath[entries[i].Path] = &entries[i]
		}
		for _, e := range entries {
			if e.Type == TypeSymlink && linkEscapes(byPath, e.Path, e.Target) {
				t.Fatalf("accepted symlink %q -> %q", e.Path, e.Target)
			}
		}
		if err := s.Export(t.Context(), snap.ID, io.Discard); err != nil {
			t.Fatalf("accepted archive does not export: %v", err)
		}
	})
}
