package kube

import (
	"archive/tar"
	"io"
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
