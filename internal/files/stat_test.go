//go:build unix

// Unix only: uses fifos, uids and unix file modes. The package is
// cross-compiled for Windows, but its tests do not run there.

package files

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestStat(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"a.txt": "hello", "d/": "", "link": "->a.txt", "dangling": "->nowhere"})
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(ws, "a.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "d"), 0o750|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())

	tests := []struct {
		path string
		want Entry
	}{
		{"a.txt", Entry{Path: ws + "/a.txt", Name: "a.txt", Type: TypeFile, Size: 5, Mode: 0o644, ModTime: mtime, UID: uid, GID: gid}},
		{ws + "/d", Entry{Path: ws + "/d", Name: "d", Type: TypeDir, Mode: 0o750 | fs.ModeSticky, UID: uid, GID: gid}},
		{"link", Entry{Path: ws + "/link", Name: "link", Type: TypeSymlink, Size: 5, Mode: 0o777, Target: "a.txt", UID: uid, GID: gid}},
		{"dangling", Entry{Path: ws + "/dangling", Name: "dangling", Type: TypeSymlink, Size: 7, Mode: 0o777, Target: "nowhere", UID: uid, GID: gid}},
		{"fifo", Entry{Path: ws + "/fifo", Name: "fifo", Type: TypeOther, Mode: 0o600, UID: uid, GID: gid}},
	}
	for _, tc := range tests {
		got, err := f.Stat(t.Context(), tc.path)
		if err != nil {
			t.Errorf("Stat(%q): %v", tc.path, err)
			continue
		}
		if tc.path != "a.txt" {
			got.ModTime = time.Time{} // only a.txt has a known time
		}
		if got.Type == TypeDir {
			got.Size = 0 // depends on the file system
		}
		if diff := cmp.Diff(got, tc.want, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("Stat(%q) (-got +want):\n%s", tc.path, diff)
		}
	}

	_, err := f.Stat(t.Context(), "missing")
	wantKind(t, err, errs.NotFound, ws+"/missing does not exist")
	_, err = f.Stat(t.Context(), "a.txt/x")
	wantKind(t, err, errs.Precondition, "is a file, not a directory")
	_, err = f.Stat(t.Context(), "")
	wantKind(t, err, errs.Invalid, "path is empty")
}

func TestList(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{
		"b.txt":        "bb",
		"a/x.go":       "x",
		"a/sub/deep":   "d",
		"a/.hidden":    "h",
		".dot/inner":   "i",
		"c-link":       "->a",
		"a/sub/z/last": "l",
	})
	names := func(r ListResult) []string {
		var out []string
		for _, e := range r.Entries {
			out = append(out, strings.TrimPrefix(e.Path, ws+"/"))
		}
		return out
	}
	tests := []struct {
		name      string
		path      string
		opts      ListOptions
		want      []string
		truncated bool
	}{
		{name: "default depth", path: ".", want: []string{"a", "b.txt", "c-link"}},
		{name: "depth 2", path: ws, opts: ListOptions{Depth: 2}, want: []string{"a", "a/sub", "a/x.go", "b.txt", "c-link"}},
		{name: "all", path: ws, opts: ListOptions{Depth: 10, Hidden: true},
			want: []string{".dot", ".dot/inner", "a", "a/.hidden", "a/sub", "a/sub/deep", "a/sub/z", "a/sub/z/last", "a/x.go", "b.txt", "c-link"}},
		{name: "truncated", path: ws, opts: ListOptions{Depth: 10, MaxEntries: 3}, want: []string{"a", "a/sub", "a/sub/deep"}, truncated: true},
		{name: "exactly max", path: ws, opts: ListOptions{MaxEntries: 3}, want: []string{"a", "b.txt", "c-link"}},
		{name: "symlink to dir as root", path: "c-link", want: []string{"c-link/sub", "c-link/x.go"}},
		{name: "a file lists itself", path: "b.txt", want: []string{"b.txt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := f.List(t.Context(), tc.path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(names(got), tc.want); diff != "" {
				t.Errorf("List (-got +want):\n%s", diff)
			}
			if got.Truncated != tc.truncated {
				t.Errorf("Truncated = %v, want %v", got.Truncated, tc.truncated)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		_, err := f.List(t.Context(), "missing", ListOptions{})
		wantKind(t, err, errs.NotFound, "missing does not exist")
		_, err = f.List(t.Context(), ".", ListOptions{Depth: -1})
		wantKind(t, err, errs.Invalid, "depth -1 is out of range")
		_, err = f.List(t.Context(), ".", ListOptions{MaxEntries: 1 << 30})
		wantKind(t, err, errs.Invalid, "max_entries")
	})
}

func TestMakeDir(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"file": "x", "exists/": ""})
	ctx := t.Context()

	e, err := f.MakeDir(ctx, "new", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.Path != ws+"/new" || e.Type != TypeDir {
		t.Errorf("MakeDir = %+v", e)
	}
	if e, err := f.MakeDir(ctx, "p/q/r", true, 0o700); err != nil || e.Mode != 0o700 {
		t.Errorf("MakeDir(parents, 0700) = %+v, %v", e, err)
	}
	if _, err := f.MakeDir(ctx, "exists", true, 0); err != nil {
		t.Errorf("MakeDir(existing, parents): %v", err)
	}
	_, err = f.MakeDir(ctx, "exists", false, 0)
	wantKind(t, err, errs.Exists, "exists already", "set parents")
	_, err = f.MakeDir(ctx, "x/y", false, 0)
	wantKind(t, err, errs.NotFound, "parent directory", "set parents")
	_, err = f.MakeDir(ctx, "file", true, 0)
	wantKind(t, err, errs.Exists, "is a file, not a directory")
	_, err = f.MakeDir(ctx, "file/sub", true, 0)
	wantKind(t, err, errs.Precondition, "not a directory")
	_, err = f.MakeDir(ctx, "m", false, fs.ModeDevice)
	wantKind(t, err, errs.Invalid, "mode")
}

func TestMove(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tests := []struct {
		name      string
		files     map[string]string
		src, dst  string
		overwrite bool
		kind      errs.Kind // 0: success
		msg       string
		after     map[string]string // expected content afterwards (nil: check nothing)
	}{
		{name: "rename file", files: map[string]string{"a": "A"}, src: "a", dst: "b", after: map[string]string{"b": "A"}},
		{name: "rename dir", files: map[string]string{"d/x": "X"}, src: "d", dst: "e", after: map[string]string{"e/x": "X"}},
		{name: "refuse overwrite", files: map[string]string{"a": "A", "b": "B"}, src: "a", dst: "b",
			kind: errs.Exists, msg: "set overwrite", after: map[string]string{"a": "A", "b": "B"}},
		{name: "overwrite file", files: map[string]string{"a": "A", "b": "B"}, src: "a", dst: "b", overwrite: true, after: map[string]string{"b": "A"}},
		{name: "no move into dir", files: map[string]string{"a": "A", "d/": ""}, src: "a", dst: "d",
			kind: errs.Exists, msg: "exists (a dir)"},
		{name: "file over dir", files: map[string]string{"a": "A", "d/": ""}, src: "a", dst: "d", overwrite: true,
			kind: errs.Precondition, msg: "cannot replace directory"},
		{name: "dir over file", files: map[string]string{"d/x": "", "a": "A"}, src: "d", dst: "a", overwrite: true,
			kind: errs.Precondition, msg: "with a directory"},
		{name: "dir over empty dir", files: map[string]string{"d/x": "X", "e/": ""}, src: "d", dst: "e", overwrite: true,
			after: map[string]string{"e/x": "X"}},
		{name: "dir over full dir", files: map[string]string{"d/x": "X", "e/y": "Y"}, src: "d", dst: "e", overwrite: true,
			kind: errs.Precondition, msg: "not empty (1 entry)", after: map[string]string{"d/x": "X", "e/y": "Y"}},
		{name: "into itself", files: map[string]string{"d/x": ""}, src: "d", dst: "d/sub", kind: errs.Invalid, msg: "into itself"},
		{name: "missing source", src: "nope", dst: "b", kind: errs.NotFound, msg: "source"},
		{name: "missing parent", files: map[string]string{"a": "A"}, src: "a", dst: "no/b", kind: errs.NotFound, msg: "create it first"},
		{name: "same path", files: map[string]string{"a": "A"}, src: "a", dst: "./a", after: map[string]string{"a": "A"}},
		{name: "symlink moves as link", files: map[string]string{"t": "T", "l": "->t"}, src: "l", dst: "m", after: map[string]string{"t": "T"}},
		{name: "root", src: "/", dst: "x", kind: errs.Invalid, msg: "cannot move /"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, ws := newTestFS(t)
			writeFiles(t, ws, tc.files)
			e, err := f.Move(ctx, tc.src, tc.dst, tc.overwrite)
			if tc.kind != 0 {
				wantKind(t, err, tc.kind, tc.msg)
			} else if err != nil {
				t.Fatal(err)
			} else if want := filepath.Join(ws, tc.dst); e.Path != want {
				t.Errorf("Move returned path %q, want %q", e.Path, want)
			}
			for name, content := range tc.after {
				if got := readFile(t, filepath.Join(ws, name)); got != content {
					t.Errorf("%s = %q, want %q", name, got, content)
				}
			}
		})
	}
}

// TestMoveAcrossDevices moves a tree from the temp dir onto a tmpfs, where
// rename fails with EXDEV and Move copies instead.
func TestMoveAcrossDevices(t *testing.T) {
	t.Parallel()
	f, ws := newTestFS(t)
	mnt := filepath.Join(ws, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, mnt, "1m")
	writeFiles(t, ws, map[string]string{"src/a.txt": "A", "src/sub/b.sh": "B", "src/link": "->a.txt", "src/empty/": "", "one": "1"})
	if err := os.Chmod(filepath.Join(ws, "src/sub/b.sh"), 0o751); err != nil {
		t.Fatal(err)
	}

	if _, err := f.Move(t.Context(), "src", "mnt/dst", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "src")); !os.IsNotExist(err) {
		t.Errorf("source still there after a cross-device move: %v", err)
	}
	got, err := f.List(t.Context(), "mnt/dst", ListOptions{Depth: 5})
	if err != nil {
		t.Fatal(err)
	}
	type ent struct {
		Path   string
		Mode   fs.FileMode
		Target string
	}
	var gotEnts []ent
	for _, e := range got.Entries {
		gotEnts = append(gotEnts, ent{strings.TrimPrefix(e.Path, mnt+"/"), e.Mode, e.Target})
	}
	want := []ent{{"dst/a.txt", 0o644, ""}, {"dst/empty", 0o755, ""}, {"dst/link", 0o777, "a.txt"}, {"dst/sub", 0o755, ""}, {"dst/sub/b.sh", 0o751, ""}}
	if diff := cmp.Diff(gotEnts, want); diff != "" {
		t.Errorf("moved tree (-got +want):\n%s", diff)
	}
	if got := readFile(t, filepath.Join(mnt, "dst/sub/b.sh")); got != "B" {
		t.Errorf("content = %q", got)
	}

	// A file, refusing to replace, then replacing.
	writeFiles(t, mnt, map[string]string{"taken": "old"})
	_, err = f.Move(t.Context(), "one", "mnt/taken", false)
	wantKind(t, err, errs.Exists, "set overwrite")
	if _, err := f.Move(t.Context(), "one", "mnt/taken", true); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(mnt, "taken")); got != "1" {
		t.Errorf("replaced file = %q, want %q", got, "1")
	}
	if names := dirNames(t, mnt); !cmp.Equal(names, []string{"dst", "taken"}) {
		t.Errorf("leftovers on the target file system: %v", names)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{
		"file": "x", "empty/": "", "full/a": "a", "full/sub/b": "b", "target": "t", "link": "->target",
	})
	if err := f.Remove(ctx, "file", false); err != nil {
		t.Error(err)
	}
	if err := f.Remove(ctx, "empty", false); err != nil {
		t.Error(err)
	}
	err := f.Remove(ctx, "full", false)
	wantKind(t, err, errs.Precondition, "not empty (2 entries)", "set recursive")
	if err := f.Remove(ctx, "link", true); err != nil {
		t.Error(err)
	}
	if got := readFile(t, filepath.Join(ws, "target")); got != "t" {
		t.Errorf("removing a symlink touched its target: %q", got)
	}
	if err := f.Remove(ctx, "full", true); err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff(dirNames(t, ws), []string{"target"}); diff != "" {
		t.Errorf("left (-got +want):\n%s", diff)
	}

	wantKind(t, f.Remove(ctx, "missing", false), errs.NotFound, "does not exist")
	wantKind(t, f.Remove(ctx, "/", true), errs.Precondition, "refusing to remove /")
	wantKind(t, f.Remove(ctx, ".", true), errs.Precondition, "workspace")
	wantKind(t, f.Remove(ctx, "..", true), errs.Precondition, "contains the workspace")
	wantKind(t, f.Remove(ctx, "~", true), errs.Precondition, "workspace")
	wantKind(t, f.Remove(ctx, "", true), errs.Invalid, "empty")
}
