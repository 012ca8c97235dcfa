//go:build unix

package snapshot

import (
	"context"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestCreateRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	want := describe(t, root, true)

	var last Progress
	calls := 0
	snap, err := s.Create(t.Context(), root, nil, "before", func(p Progress) { last = p; calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 || last.FilesDone != last.FilesTotal || last.BytesDone != last.BytesTotal || last.FilesTotal != snap.Files {
		t.Errorf("progress: %d calls, last %+v; snapshot has %d files", calls, last, snap.Files)
	}
	if snap.Files != 8 || snap.Symlinks != 3 || snap.Dirs != 6 || snap.Label != "before" || snap.Root != root {
		t.Errorf("snapshot = %+v", snap)
	}
	if len(snap.Skipped) != 0 {
		t.Errorf("skipped %v", snap.Skipped)
	}

	// Change everything that can change.
	writeFile(t, filepath.Join(root, "a.txt"), "changed\n", 0o644)
	if err := os.Chmod(filepath.Join(root, "bin", "run.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, "secret"))
	os.RemoveAll(filepath.Join(root, "empty"))
	writeFile(t, filepath.Join(root, "empty"), "now a file", 0o644)
	os.Remove(filepath.Join(root, "link-rel"))
	symlink(t, "secret", filepath.Join(root, "link-rel"))
	writeFile(t, filepath.Join(root, "new.txt"), "new", 0o644)
	writeFile(t, filepath.Join(root, "sub", "deep", "extra", "more.txt"), "more", 0o644)
	writeFile(t, filepath.Join(root, "big.bin"), bigContent(2, 3<<20+17), 0o644)

	changes, err := s.Diff(t.Context(), snap.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ChangeKind{}
	for _, c := range changes {
		got[c.Path] = c.Kind
	}
	wantChanges := map[string]ChangeKind{
		"a.txt":                   Modified,
		"big.bin":                 Modified,
		"bin/run.sh":              Modified,
		"empty":                   TypeChanged,
		"link-rel":                Modified,
		"new.txt":                 Added,
		"secret":                  Removed,
		"sub/deep/extra":          Added,
		"sub/deep/extra/more.txt": Added,
	}
	if d := cmp.Diff(got, wantChanges); d != "" {
		t.Errorf("Diff against the live tree (-got +want):\n%s", d)
	}
	if !sort.SliceIsSorted(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path }) {
		t.Error("changes are not sorted by path")
	}

	// Without delete-extra the new paths stay; with it the tree is as it was.
	sum, err := s.Restore(t.Context(), snap.ID, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Target != root || sum.PathsRemoved != 0 || sum.FilesWritten != 4 || sum.FilesUnchanged != 7 {
		t.Errorf("restore summary = %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(root, "new.txt")); err != nil {
		t.Errorf("new.txt should survive a restore without delete-extra: %v", err)
	}
	sum, err = s.Restore(t.Context(), snap.ID, "", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.PathsRemoved != 3 || sum.FilesWritten != 0 || sum.FilesUnchanged != 11 {
		t.Errorf("restore summary with delete-extra = %+v", sum)
	}
	if d := cmp.Diff(describe(t, root, true), want); d != "" {
		t.Errorf("restored tree (-got +want):\n%s", d)
	}
	if changes, err := s.Diff(t.Context(), snap.ID, ""); err != nil || len(changes) != 0 {
		t.Errorf("Diff after restore = %v, %v; want no changes", changes, err)
	}

	// Into a new directory.
	other := filepath.Join(t.TempDir(), "elsewhere", "copy")
	sum, err = s.Restore(t.Context(), snap.ID, other, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Target != other || sum.FilesWritten != 11 {
		t.Errorf("restore summary into a new directory = %+v", sum)
	}
	if d := cmp.Diff(describe(t, other, true), want); d != "" {
		t.Errorf("tree restored elsewhere (-got +want):\n%s", d)
	}
}

func TestRestoreLeavesIdenticalFilesAlone(t *testing.T) {
	t.Parallel()
	var opens atomic.Int64
	s := newTestStore(t, Options{Open: countingOpen(&opens)})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	snap, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ino := func(p string) uint64 {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	before := ino("big.bin")
	if err := os.Chmod(filepath.Join(root, "secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	opens.Store(0)
	sum, err := s.Restore(t.Context(), snap.ID, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.FilesWritten != 0 || sum.FilesUnchanged != 11 {
		t.Errorf("summary = %+v, want everything unchanged", sum)
	}
	if ino("big.bin") != before {
		t.Error("big.bin was rewritten")
	}
	// Only the file whose mode changed (its change time too) is read to compare.
	if n := opens.Load(); n != 1 {
		t.Errorf("restore read %d files, want 1", n)
	}
	if fi, _ := os.Stat(filepath.Join(root, "secret")); fi.Mode().Perm() != 0o600 {
		t.Errorf("secret has mode %v after restore, want 0600", fi.Mode())
	}
}

func TestDedup(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	// Two files with the same content inside one snapshot are stored once.
	writeFile(t, filepath.Join(root, "copy-of-big.bin"), bigContent(1, 3<<20+17), 0o644)
	writeFile(t, filepath.Join(root, "copy-of-a.txt"), "hello\n", 0o600)
	first, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.StoredBytes <= 0 || first.StoredBytes != storedBytes(t, s)-packOverhead(s) {
		t.Errorf("stored %d bytes; the store holds %d", first.StoredBytes, storedBytes(t, s))
	}
	size := storedBytes(t, s)

	second, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.StoredBytes != 0 || storedBytes(t, s) != size {
		t.Errorf("second snapshot stored %d bytes, store grew from %d to %d", second.StoredBytes, size, storedBytes(t, s))
	}

	// Another tree with the same content, read in full, adds nothing either.
	other := filepath.Join(t.TempDir(), "other")
	makeTree(t, other)
	third, err := s.Create(t.Context(), other, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if third.StoredBytes != 0 || storedBytes(t, s) != size {
		t.Errorf("identical tree stored %d bytes", third.StoredBytes)
	}
}

// packOverhead is the bytes of pack indexes in the store.
func packOverhead(s *Store) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.packs {
		n += int64(len(p.entries)*packEntrySize + packTailSize)
	}
	return n
}

func TestUnchangedFilesAreNotRead(t *testing.T) {
	t.Parallel()
	var opens atomic.Int64
	s := newTestStore(t, Options{Open: countingOpen(&opens)})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	if _, err := s.Create(t.Context(), root, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 8 {
		t.Errorf("first snapshot opened %d files, want 8", n)
	}

	opens.Store(0)
	if _, err := s.Create(t.Context(), root, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 0 {
		t.Errorf("unchanged snapshot opened %d files, want 0", n)
	}

	writeFile(t, filepath.Join(root, "sub", "deep", "x.go"), "package y\n", 0o644)
	opens.Store(0)
	snap, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 1 {
		t.Errorf("snapshot after one change opened %d files, want 1", n)
	}
	// The index must not have hidden the change.
	_, entries, err := s.Get(t.Context(), snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Path == "sub/deep/x.go" && e.SHA256 != hashBytes([]byte("package y\n")) {
			t.Errorf("x.go has hash %s, not that of its new content", e.SHA256)
		}
	}
}

func TestRecentlyChangedFilesAreReadAgain(t *testing.T) {
	t.Parallel()
	var opens atomic.Int64
	// With the default window, files written just now may still change
	// within the file system's timestamp granularity: not trusted.
	s := newTestStore(t, Options{Open: countingOpen(&opens), RacyWindow: 2 * time.Second})
	root := filepath.Join(t.TempDir(), "tree")
	writeFile(t, filepath.Join(root, "fresh"), "1", 0o644)
	writeFile(t, filepath.Join(root, "old"), "2", 0o644)
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, "old"), long, long); err != nil {
		t.Fatal(err)
	}
	// The change time cannot be set back: move the clock forward instead.
	s.opts.Now = func() time.Time { return time.Now().Add(time.Second) }
	if _, err := s.Create(t.Context(), root, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	opens.Store(0)
	if _, err := s.Create(t.Context(), root, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 2 {
		t.Errorf("opened %d files, want 2 (both changed within the window)", n)
	}
	s.opts.Now = func() time.Time { return time.Now().Add(time.Minute) }
	if _, err := s.Create(t.Context(), root, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	opens.Store(0)
	if _, err := s.Create(t.Context(), root, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 0 {
		t.Errorf("opened %d files once they were settled, want 0", n)
	}
}

// changingFile changes the file it reads from after the first read.
type changingFile struct {
	*os.File
	change func()
	once   sync.Once
}

func (c *changingFile) Read(p []byte) (int, error) {
	n, err := c.File.Read(p[:min(len(p), 4096)])
	c.once.Do(c.change)
	return n, err
}

func TestFileChangingWhileRead(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "tree")
	grow := filepath.Join(root, "grow.log")
	shrink := filepath.Join(root, "shrink.log")
	writeFile(t, grow, strings.Repeat("g", 10000), 0o644)
	writeFile(t, shrink, strings.Repeat("s", 10000), 0o644)
	open := func(name string) (File, error) {
		f, err := openSource(name)
		if err != nil {
			return nil, err
		}
		switch name {
		case grow:
			return &changingFile{File: f, change: func() {
				g, _ := os.OpenFile(grow, os.O_APPEND|os.O_WRONLY, 0)
				g.WriteString(strings.Repeat("G", 5000))
				g.Close()
			}}, nil
		case shrink:
			return &changingFile{File: f, change: func() { os.Truncate(shrink, 6000) }}, nil
		}
		return f, nil
	}
	var opens atomic.Int64
	s := newTestStore(t, Options{Open: open})
	snap, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, entries, err := s.Get(t.Context(), snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, e := range entries {
		sizes[e.Path] = e.Size
		want := strings.Repeat(e.Path[:1], int(e.Size))
		if e.SHA256 != hashBytes([]byte(want)) {
			t.Errorf("%s: hash is not that of the %d bytes read", e.Path, e.Size)
		}
		if e.Path == "shrink.log" && !e.stamp.racy {
			t.Errorf("%s shrank while read but is not marked racy", e.Path)
		}
	}
	if d := cmp.Diff(sizes, map[string]int64{"grow.log": 10000, "shrink.log": 6000}); d != "" {
		t.Errorf("sizes recorded (-got +want):\n%s", d)
	}
	// The next snapshot reads both again and sees what they hold now: the
	// recorded times and sizes are those from before the change.
	s.opts.Open = countingOpen(&opens)
	snap, err = s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if opens.Load() != 2 || snap.TotalBytes != 15000+6000 {
		t.Errorf("second snapshot opened %d files, %d bytes; want 2 files, 21000 bytes", opens.Load(), snap.TotalBytes)
	}
}

func TestSkippedPaths(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "tree")
	writeFile(t, filepath.Join(root, "ok.txt"), "fine", 0o644)
	writeFile(t, filepath.Join(root, "locked.txt"), "secret", 0o644)
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(root, "s.sock"), Net: "unix"})
	if err != nil {
		t.Skipf("cannot create a unix socket here: %v", err)
	}
	defer lis.Close()
	// Root can read anything: make one file unreadable through the hook.
	open := func(name string) (File, error) {
		if filepath.Base(name) == "locked.txt" {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
		}
		f, err := openSource(name)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	s := newTestStore(t, Options{Open: open})
	snap, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Skip{
		{Path: "fifo", Reason: "named pipe"},
		{Path: "locked.txt", Reason: "permission denied"},
		{Path: "s.sock", Reason: "socket"},
	}
	if d := cmp.Diff(snap.Skipped, want); d != "" {
		t.Errorf("skipped (-got +want):\n%s", d)
	}
	if snap.Files != 1 {
		t.Errorf("snapshot has %d files, want 1", snap.Files)
	}
	// Restore with delete-extra leaves what the snapshot skipped alone.
	sum, err := s.Restore(t.Context(), snap.ID, "", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.PathsRemoved != 0 {
		t.Errorf("delete-extra removed %d paths the snapshot had skipped", sum.PathsRemoved)
	}
	if _, err := os.Stat(filepath.Join(root, "locked.txt")); err != nil {
		t.Error(err)
	}
}

func TestSymlinkLoopsAreHarmless(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	mkdir(t, filepath.Join(root, "d"), 0o755)
	symlink(t, "b", filepath.Join(root, "a"))
	symlink(t, "a", filepath.Join(root, "b"))
	symlink(t, ".", filepath.Join(root, "self"))
	symlink(t, "..", filepath.Join(root, "d", "up"))
	symlink(t, root, filepath.Join(root, "d", "root"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	snap, err := s.Create(ctx, root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Symlinks != 5 || snap.Dirs != 1 || snap.Files != 0 {
		t.Errorf("snapshot = %+v", snap)
	}
	other := filepath.Join(t.TempDir(), "copy")
	if _, err := s.Restore(ctx, snap.ID, other, false, nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(describe(t, other, false), describe(t, root, false)); d != "" {
		t.Errorf("restored links (-got +want):\n%s", d)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "x", 0o644)
	if _, err := s.Create(t.Context(), dir, nil, "", nil); err != nil { // one good snapshot
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		kind errs.Kind
		msg  string
	}{
		{"missing root", func() error {
			_, err := s.Create(t.Context(), filepath.Join(dir, "nope"), nil, "", nil)
			return err
		}, errs.NotFound, "does not exist"},
		{"file root", func() error {
			_, err := s.Create(t.Context(), file, nil, "", nil)
			return err
		}, errs.Precondition, "is a file, not a directory"},
		{"relative root", func() error {
			_, err := s.Create(t.Context(), "some/dir", nil, "", nil)
			return err
		}, errs.Invalid, "not an absolute path"},
		{"root inside the store", func() error {
			_, err := s.Create(t.Context(), s.blobDir, nil, "", nil)
			return err
		}, errs.Invalid, "inside the snapshot store"},
		{"bad exclude", func() error {
			_, err := s.Create(t.Context(), dir, []string{"[abc"}, "", nil)
			return err
		}, errs.Invalid, "not a valid glob"},
		{"huge label", func() error {
			_, err := s.Create(t.Context(), dir, nil, strings.Repeat("x", MaxLabelBytes+1), nil)
			return err
		}, errs.Invalid, "label"},
		{"traversal id", func() error {
			_, _, err := s.Get(t.Context(), "../../etc/passwd")
			return err
		}, errs.Invalid, "not a snapshot id"},
		{"empty id", func() error {
			_, err := s.Delete(t.Context(), "")
			return err
		}, errs.Invalid, "no snapshot id"},
		{"unknown id", func() error {
			_, err := s.Restore(t.Context(), "s-20200101-000000-00000000", dir, false, nil)
			return err
		}, errs.NotFound, "no snapshot s-20200101-000000-00000000"},
		{"unknown id to diff against", func() error {
			list, _ := s.List(t.Context())
			_, err := s.Diff(t.Context(), list[0].ID, "s-20200101-000000-00000000")
			return err
		}, errs.NotFound, "no snapshot"},
		{"restore onto a file", func() error {
			list, _ := s.List(t.Context())
			_, err := s.Restore(t.Context(), list[0].ID, file, false, nil)
			return err
		}, errs.Precondition, "is a file"},
		{"export of unknown id", func() error {
			return s.Export(t.Context(), "s-20200101-000000-00000000", io.Discard)
		}, errs.NotFound, "no snapshot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil {
				t.Fatal("no error")
			}
			if k := errs.KindOf(err); k != tt.kind {
				t.Errorf("kind %v, want %v (%v)", k, tt.kind, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

func TestExcludes(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	for _, p := range []string{"keep.go", "top.txt", "a/top.txt", "a/node_modules/x.js", "node_modules/y.js",
		"b/c.o", "c.o", "build/out", "a/build/out", "tmp/x.tmp", "x.tmp"} {
		writeFile(t, filepath.Join(root, p), p, 0o644)
	}
	writeFile(t, filepath.Join(root, "file-named-dir"), "f", 0o644)
	mkdir(t, filepath.Join(root, "a", "file-named-dir"), 0o755)
	excl := []string{"node_modules", "*.o", "/build", "/top.txt", "**/*.tmp", "file-named-dir/"}
	snap, err := s.Create(t.Context(), root, excl, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, entries, err := s.Get(t.Context(), snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Path)
	}
	want := []string{"a", "a/build", "a/build/out", "a/top.txt", "b", "file-named-dir", "keep.go", "tmp"}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("paths kept (-got +want):\n%s", d)
	}
	// delete-extra leaves excluded paths alone.
	sum, err := s.Restore(t.Context(), snap.ID, "", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.PathsRemoved != 0 {
		t.Errorf("delete-extra removed %d excluded paths", sum.PathsRemoved)
	}
}

func TestDeleteCollectsOnlyUnreferencedBlobs(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	a, err := s.Create(t.Context(), root, nil, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	// b shares everything but two files with a.
	writeFile(t, filepath.Join(root, "a.txt"), "only in b\n", 0o644)
	writeFile(t, filepath.Join(root, "big.bin"), bigContent(3, 2<<20), 0o644)
	b, err := s.Create(t.Context(), root, nil, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantB := describe(t, root, true)
	before := storedBytes(t, s)

	freed, err := s.Delete(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	after := storedBytes(t, s)
	if freed <= 0 || freed != before-after {
		t.Errorf("Delete freed %d bytes; the store shrank by %d", freed, before-after)
	}
	// What went is what only a had: its old a.txt and big.bin (compressed).
	if freed < 1<<20 || freed > a.StoredBytes {
		t.Errorf("freed %d bytes; a stored %d", freed, a.StoredBytes)
	}
	if _, _, err := s.Get(t.Context(), a.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("Get of a deleted snapshot: %v", err)
	}
	// b is whole.
	other := filepath.Join(t.TempDir(), "b")
	if _, err := s.Restore(t.Context(), b.ID, other, false, nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(describe(t, other, true), wantB); d != "" {
		t.Errorf("b after a was deleted (-got +want):\n%s", d)
	}
	if err := s.Export(t.Context(), b.ID, io.Discard); err != nil {
		t.Error(err)
	}
	// Reopened, the store finds b's packed blobs again.
	s2 := newTestStore(t, Options{Dir: s.dir})
	if err := s2.Export(t.Context(), b.ID, io.Discard); err != nil {
		t.Errorf("export after reopening: %v", err)
	}

	freed, err = s.Delete(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if freed != after {
		t.Errorf("deleting the last snapshot freed %d of %d bytes", freed, after)
	}
	assertEmptyStore(t, s)
	if _, err := s.Delete(t.Context(), b.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("second Delete: %v, want NotFound", err)
	}
}

func TestDiskFullLeavesNothing(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	for _, after := range []int{0, 1} {
		s := newTestStore(t, Options{Workers: 1})
		var calls atomic.Int64
		s.failWrite = func() error {
			if calls.Add(1) > int64(after) {
				return &fs.PathError{Op: "write", Path: "blob", Err: syscall.ENOSPC}
			}
			return nil
		}
		_, err := s.Create(t.Context(), root, nil, "", nil)
		if errs.KindOf(err) != errs.Exhausted || !strings.Contains(err.Error(), "disk") || !strings.Contains(err.Error(), "nothing was saved") {
			t.Errorf("after %d writes: err = %v, want a disk-full error", after, err)
		}
		assertEmptyStore(t, s)
		s.failWrite = nil
		snap, err := s.Create(t.Context(), root, nil, "", nil)
		if err != nil {
			t.Fatalf("Create once there is room again: %v", err)
		}
		if err := s.Export(t.Context(), snap.ID, io.Discard); err != nil {
			t.Error(err)
		}
	}
}

func TestCancelledCreateLeavesNothing(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	_, err := s.Create(ctx, root, nil, "", func(Progress) {
		if calls++; calls == 3 {
			cancel()
		}
	})
	if errs.KindOf(err) != errs.Canceled {
		t.Fatalf("err = %v, want Canceled", err)
	}
	assertEmptyStore(t, s)
}

// TestConcurrentCreateAndDelete runs snapshots while others are deleted:
// collection must never take a blob a running Create is about to refer
// to. Every snapshot left must export whole.
func TestConcurrentCreateAndDelete(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	for i := range 20 {
		writeFile(t, filepath.Join(root, "many", string(rune('a'+i))), strings.Repeat("x", i*100), 0o644)
	}
	first, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan string, 100)
	ids <- first.ID
	var wg sync.WaitGroup
	var createErr, deleteErr atomic.Value
	wg.Go(func() {
		for range 8 {
			snap, err := s.Create(t.Context(), root, nil, "", nil)
			if err != nil {
				createErr.Store(err)
				return
			}
			ids <- snap.ID
		}
	})
	wg.Go(func() {
		for range 6 {
			id := <-ids
			if _, err := s.Delete(t.Context(), id); err != nil {
				deleteErr.Store(err)
				return
			}
		}
	})
	wg.Wait()
	if err := createErr.Load(); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := deleteErr.Load(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Errorf("%d snapshots left, want 3", len(list))
	}
	for _, snap := range list {
		if err := s.Export(t.Context(), snap.ID, io.Discard); err != nil {
			t.Errorf("snapshot %s: %v", snap.ID, err)
		}
	}
}

func TestListAndGet(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	var ids []string
	for _, label := range []string{"one", "two", "three"} {
		snap, err := s.Create(t.Context(), root, []string{"*.bin"}, label, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, snap.ID)
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, snap := range list {
		got = append(got, snap.ID)
	}
	if d := cmp.Diff(got, ids); d != "" {
		t.Errorf("List order (-got +want):\n%s", d)
	}
	snap, entries, err := s.Get(t.Context(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if snap.Label != "two" || len(entries) != int(snap.Files+snap.Dirs+snap.Symlinks) {
		t.Errorf("Get = %+v with %d entries", snap, len(entries))
	}
	if d := cmp.Diff(snap.Excludes, []string{"*.bin"}); d != "" {
		t.Errorf("excludes (-got +want):\n%s", d)
	}
	for _, e := range entries {
		if e.Path == "name\xff.txt" && e.SHA256 != hashBytes([]byte("latin-1 name")) {
			t.Error("the name that is not UTF-8 lost its content")
		}
	}
	// A corrupt manifest is left out of the list, not fatal.
	if err := os.WriteFile(filepath.Join(s.manDir, "s-20200101-000000-deadbeef"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(t.Context()); err != nil || len(list) != 3 {
		t.Errorf("List with a corrupt manifest: %d, %v", len(list), err)
	}
	if _, _, err := s.Get(t.Context(), "s-20200101-000000-deadbeef"); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("Get of a corrupt manifest: %v", err)
	}
}

func TestDiffBetweenSnapshots(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	root := filepath.Join(t.TempDir(), "tree")
	makeTree(t, root)
	a, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "a.txt"), "other\n", 0o644)
	os.Remove(filepath.Join(root, "zero"))
	now := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(root, "secret"), now, now) // time alone is no change
	b, err := s.Create(t.Context(), root, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := s.Diff(t.Context(), a.ID, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Kind.String()+" "+c.Path)
		if c.Kind == Modified && (c.From == nil || c.To == nil || c.From.SHA256 == c.To.SHA256) {
			t.Errorf("modified %s: from %+v to %+v", c.Path, c.From, c.To)
		}
	}
	if d := cmp.Diff(got, []string{"modified a.txt", "removed zero"}); d != "" {
		t.Errorf("changes (-got +want):\n%s", d)
	}
	if changes, err := s.Diff(t.Context(), b.ID, b.ID); err != nil || len(changes) != 0 {
		t.Errorf("Diff of a snapshot with itself: %v, %v", changes, err)
	}
	// The root gone: a clear error.
	os.RemoveAll(root)
	if _, err := s.Diff(t.Context(), a.ID, ""); errs.KindOf(err) != errs.NotFound || !strings.Contains(err.Error(), "no longer exists") {
		t.Errorf("Diff against a vanished root: %v", err)
	}
}

func TestOpenRemovesLeftovers(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	for _, name := range []string{"blob-123", "pack-456", "manifest-789"} {
		if err := os.WriteFile(filepath.Join(s.tmpDir, name), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A pack cut short by a crash is ignored, not fatal.
	if err := os.WriteFile(filepath.Join(s.packDir, "0123456789abcdef"), []byte("half a pack"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := newTestStore(t, Options{Dir: s.dir})
	if names, _ := readNames(s2.tmpDir); len(names) != 0 {
		t.Errorf("tmp holds %v after Open", names)
	}
	if len(s2.packs) != 0 {
		t.Errorf("a broken pack was loaded")
	}
	if _, err := os.Stat(filepath.Join(s.packDir, "0123456789abcdef")); err != nil {
		t.Errorf("the broken pack was removed (it might hold the only copy of something): %v", err)
	}
}
