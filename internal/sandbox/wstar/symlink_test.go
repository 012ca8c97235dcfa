package wstar

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// An extracted symlink keeps its own modification time (an archive's
// restore compares it), not the extraction's; Chtimes would have set its
// target's.
func TestExtractKeepsSymlinkTimes(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	when := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "d/f", Size: 3, Mode: 0o644, ModTime: when})
	_, _ = tw.Write([]byte("one"))
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "d/l", Linkname: "f", Mode: 0o777, ModTime: when})
	_ = tw.Close()
	if err := Extract(root, &buf, -1, -1); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "d", "l"))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("d/l: %v %v, want a symlink", fi, err)
	}
	if runtime.GOOS == "linux" && !fi.ModTime().Equal(when) {
		t.Errorf("the symlink's mtime %v, want the stream's %v", fi.ModTime(), when)
	}
}
