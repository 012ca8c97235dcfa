//go:build linux

package files

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// TestPermissionDenied checks the errors an agent gets where the OS says
// no. Root is never told no, so as root the test runs itself again as the
// user nobody.
func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		if os.Getenv("AGENTD_FILES_TEST_NOBODY") != "" {
			t.Fatal("still root after dropping privileges")
		}
		runAsNobody(t, "^TestPermissionDenied$")
		return
	}
	t.Parallel()
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"secret": "s", "ro.txt": "r", "locked/inner": "i", "closed/x": "x", "tree/ok.txt": "needle", "tree/no.txt": "needle"})
	chmod := func(name string, mode os.FileMode) {
		if err := os.Chmod(filepath.Join(ws, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	chmod("secret", 0)
	chmod("ro.txt", 0o444)
	chmod("tree/no.txt", 0)
	chmod("locked", 0o555)
	chmod("closed", 0)
	t.Cleanup(func() { chmod("locked", 0o755); chmod("closed", 0o755) })
	ctx := t.Context()

	err := f.Read(ctx, "secret", 0, 0, func(ReadChunk) error { return nil })
	wantKind(t, err, errs.Permission, "permission denied", "secret", "agentd runs as user")
	_, err = f.ReadLines(ctx, "secret", LinesOptions{})
	wantKind(t, err, errs.Permission, "permission denied")
	_, err = f.Write(ctx, "ro.txt", WriteOptions{}, strings.NewReader("x"))
	wantKind(t, err, errs.Permission, "not writable", "0444")
	_, err = f.Edit(ctx, "ro.txt", []Replacement{{Old: "r", New: "w"}}, EditOptions{})
	wantKind(t, err, errs.Permission, "not writable")
	_, err = f.Write(ctx, "locked/new", WriteOptions{}, strings.NewReader("x"))
	wantKind(t, err, errs.Permission, "cannot create a temporary file", "locked")
	_, err = f.Write(ctx, "locked/inner", WriteOptions{}, strings.NewReader("x"))
	wantKind(t, err, errs.Permission, "cannot create a temporary file")
	_, err = f.List(ctx, "closed", ListOptions{})
	wantKind(t, err, errs.Permission, "permission denied")
	wantKind(t, f.Remove(ctx, "locked/inner", false), errs.Permission, "permission denied")
	wantKind(t, f.Remove(ctx, "locked", true), errs.Permission, "stopped part way", "permission denied: "+ws+"/locked/inner")
	_, err = f.MakeDir(ctx, "locked/sub", false, 0)
	wantKind(t, err, errs.Permission, "permission denied")
	_, err = f.Move(ctx, "locked/inner", "moved", false)
	wantKind(t, err, errs.Permission, "permission denied")

	var n int
	sum, err := f.Search(ctx, SearchOptions{Pattern: "needle", Path: "tree"}, func(Match) error { n++; return nil })
	if err != nil || n != 1 || sum.FilesSkipped != 1 {
		t.Errorf("Search over an unreadable file: %d matches, %+v, %v; want 1 match and 1 file skipped", n, sum, err)
	}
	if got := readFile(t, filepath.Join(ws, "locked/inner")); got != "i" {
		t.Errorf("locked/inner changed to %q", got)
	}
}

// runAsNobody runs the tests matching pattern in a copy of the test binary
// as the user nobody, and fails with its output if they fail.
func runAsNobody(t *testing.T, pattern string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentd-files-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "files.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run="+pattern, "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENTD_FILES_TEST_NOBODY=1", "TMPDIR=/tmp", "HOME=/tmp", "GOCOVERDIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("as nobody, no test passed:\n%s", out)
	}
	t.Logf("as nobody:\n%s", out)
}
