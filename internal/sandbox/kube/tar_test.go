package kube

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// tarWriter writes small test streams.
type tarWriter struct {
	tw *tar.Writer
	t  time.Time
}

func newTar(w io.Writer) *tarWriter {
	return &tarWriter{tw: tar.NewWriter(w), t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (w *tarWriter) symlink(name, target string) {
	_ = w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: w.t})
}

func (w *tarWriter) file(name, data string) {
	_ = w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644, ModTime: w.t})
	_, _ = w.tw.Write([]byte(data))
}

func (w *tarWriter) close() { _ = w.tw.Close() }

// An imported symlink keeps its own modification time (the archive's
// restore compares it), not the import's; Chtimes would have set its
// target's.
func TestImportKeepsSymlinkTimes(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	w := newTar(&buf)
	w.file("d/f", "one")
	w.symlink("d/l", "f")
	w.close()
	if err := importDir(root, &buf); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "d", "l"))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("d/l: %v %v, want a symlink", fi, err)
	}
	if runtime.GOOS == "linux" && !fi.ModTime().Equal(w.t) {
		t.Errorf("the symlink's mtime %v, want the stream's %v", fi.ModTime(), w.t)
	}
}
