//go:build linux

package archive

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// writeTree writes entries (as tests write tars) into dir.
func writeTree(t *testing.T, dir string, entries []tentry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(dir, e.Name)
		var err error
		switch e.Type {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o700)
		case tar.TypeReg:
			err = os.WriteFile(p, []byte(e.Data), 0o600)
		case tar.TypeSymlink:
			err = os.Symlink(e.Link, p)
		}
		if err == nil && e.Type != tar.TypeSymlink {
			err = os.Chmod(p, os.FileMode(e.Mode&0o777)|modeBits(e.Mode))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := len(entries) - 1; i >= 0; i-- { // a directory's after its content
		e := entries[i]
		mt := e.MTime
		if mt.IsZero() {
			mt = t0
		}
		ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, e.Name), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
}

func modeBits(m int64) os.FileMode {
	var fm os.FileMode
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// TestPutDir archives a directory read directly and restores the same
// tree a Put of its tar gives; a symlink out of the tree stays a symlink
// (never followed) and a named pipe is listed as skipped.
func TestPutDir(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), "file://"+t.TempDir()+"/archive", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ws := workspace(11, 30)
	ws = append(ws,
		tentry{Name: "sticky/", Type: tar.TypeDir, Mode: 0o1777},
		tentry{Name: "sticky/run", Type: tar.TypeReg, Mode: 0o4755, Data: "#!/bin/sh\n", MTime: t0.Add(1500 * time.Millisecond)},
		tentry{Name: "sticky/same", Type: tar.TypeReg, Mode: 0o644, Data: "#!/bin/sh\n"},
		tentry{Name: "out", Type: tar.TypeSymlink, Mode: 0o777, Link: "/etc/passwd"},
	)
	dir := t.TempDir()
	writeTree(t, dir, ws)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := s.PutDir(ctx, "pd", "test", dir, DirOptions{})
	if err != nil {
		t.Fatalf("PutDir: %v", err)
	}
	if diff := cmp.Diff([]string{"pipe: named pipe"}, m.Skipped); diff != "" {
		t.Errorf("Skipped (-want +got):\n%s", diff)
	}
	if err := s.VerifyRest(ctx, m); err != nil {
		t.Fatalf("VerifyRest: %v", err)
	}
	viaTar := put(t, s, "pd", makeTar(t, ws))
	if viaTar.NewBytes != 0 {
		t.Errorf("a Put of the same tree's tar uploaded %d bytes, want 0", viaTar.NewBytes)
	}
	got, want := sortTar(readTar(t, restore(t, s, "pd", m.ID))), sortTar(readTar(t, restore(t, s, "pd", viaTar.ID)))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PutDir's archive (-tar's +dir's):\n%s", diff)
	}
}

func sortTar(es []tentry) map[string]tentry {
	out := make(map[string]tentry, len(es))
	for _, e := range es {
		out[strings.TrimSuffix(e.Name, "/")] = e
	}
	return out
}

// TestPutDirBasis checks the stat cache: a file the basis vouches for
// (same size, mode and mtime, inode unchanged since Before) is not read,
// and every other one is.
func TestPutDirBasis(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), "file://"+t.TempDir()+"/archive", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// The org holds a blob "other" of the same size as "actual": a
	// basis that names it for the file shows whether the file was read.
	put(t, s, "pb", makeTar(t, []tentry{{Name: "x", Type: tar.TypeReg, Mode: 0o644, Data: "OTHER!"}}))
	other := sum("OTHER!")
	dir := t.TempDir()
	writeTree(t, dir, []tentry{{Name: "f", Type: tar.TypeReg, Mode: 0o644, Data: "actual"}})
	before := ctimeAfter(t, dir, filepath.Join(dir, "f"))
	basis := func(e Entry) *Basis { return &Basis{Entries: []Entry{e}, Before: before} }
	vouch := Entry{Path: "f", Type: TypeFile, Mode: 0o644, Size: 6, SHA256: other, ModTime: t0}

	for _, tc := range []struct {
		name  string
		basis *Basis
		want  string
	}{
		{"vouched: not read", basis(vouch), other},
		{"no basis", nil, sum("actual")},
		{"other size", basis(Entry{Path: "f", Type: TypeFile, Mode: 0o644, Size: 7, SHA256: other, ModTime: t0}), sum("actual")},
		{"other mode", basis(Entry{Path: "f", Type: TypeFile, Mode: 0o600, Size: 6, SHA256: other, ModTime: t0}), sum("actual")},
		{"other mtime", basis(Entry{Path: "f", Type: TypeFile, Mode: 0o644, Size: 6, SHA256: other, ModTime: t0.Add(time.Second)}), sum("actual")},
		{"changed after Before", &Basis{Entries: []Entry{vouch}, Before: before.Add(-time.Hour)}, sum("actual")},
		{"blob missing", basis(Entry{Path: "f", Type: TypeFile, Mode: 0o644, Size: 6, SHA256: sum("absent"), ModTime: t0}), sum("actual")},
	} {
		m, err := s.PutDir(ctx, "pb", tc.name, dir, DirOptions{Basis: tc.basis})
		if err != nil {
			t.Fatalf("%s: PutDir: %v", tc.name, err)
		}
		if got := m.Entries[0].SHA256; got != tc.want {
			t.Errorf("%s: sha256 %s, want %s", tc.name, got, tc.want)
		}
		if err := s.VerifyRest(ctx, m); err != nil {
			t.Errorf("%s: VerifyRest: %v", tc.name, err)
		}
	}

	// A write that keeps size and mtime (and so fools a cache of
	// mtimes) moves the ctime past Before: the file is read.
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("sneaky"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, t0, t0); err != nil {
		t.Fatal(err)
	}
	m, err := s.PutDir(ctx, "pb", "rewritten", dir, DirOptions{Basis: basis(vouch)})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Entries[0].SHA256; got != sum("sneaky") {
		t.Errorf("a file rewritten with its old mtime after Before: sha256 %s, want the new content's %s", got, sum("sneaky"))
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// ctimeAfter returns an instant after p's ctime, such that whatever is
// changed later has a ctime at or after it (the kernel's file times are
// coarse: a marker file is touched until its ctime moves past p's).
func ctimeAfter(t *testing.T, dir, p string) time.Time {
	t.Helper()
	ct := func(p string) time.Time {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return time.Unix(st.Ctim.Unix())
	}
	base := ct(p)
	marker := filepath.Join(t.TempDir(), "marker")
	for {
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if c := ct(marker); c.After(base) {
			return c
		}
	}
}
