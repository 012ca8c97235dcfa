package files

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// newTestFS returns an FS whose workspace and home are a fresh temp dir.
func newTestFS(t testing.TB) (*FS, string) {
	t.Helper()
	ws := t.TempDir()
	// t.TempDir may be reached through a symlink (macOS /var); use the real path.
	ws, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Options{Workspace: ws, Home: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Wait)
	return f, ws
}

// writeFiles creates files under dir: name → content. A name ending in
// "/" is a directory; content "->target" makes a symlink.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		content := files[name]
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantKind fails the test unless err is of the given kind and its message
// contains every one of the fragments.
func wantKind(t testing.TB, err error, kind errs.Kind, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want kind %v", kindName(kind))
	}
	if got := errs.KindOf(err); got != kind {
		t.Fatalf("error %q: kind %v, want %v", err, kindName(got), kindName(kind))
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

func kindName(k errs.Kind) string {
	return [...]string{"Unknown", "Invalid", "NotFound", "Exists", "Precondition", "Permission",
		"Exhausted", "Unavailable", "Canceled", "Timeout"}[k]
}

// dirNames lists the names in dir, sorted, for checking that nothing was
// left behind.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// errReader yields data and then fails with err.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

var errClientGone = errors.New("client went away")

// mountTmpfs mounts a tmpfs of the given size (e.g. "64k") on dir for
// the test, or skips the test when mounting is not permitted.
func mountTmpfs(t testing.TB, dir, size string, extra ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	opts := "size=" + size
	for _, e := range extra {
		opts += "," + e
	}
	if err := mount("tmpfs", dir, "tmpfs", opts); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unmount(dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}
