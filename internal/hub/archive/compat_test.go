package archive

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/snapshot"
)

// TestSnapshotExportImport takes a tree through the whole way an archived
// workspace goes: a snapshot of it, its Export, Put, Restore, Import into
// a fresh snapshot store, and Restore of that snapshot into a new
// directory; the new tree must be the old one, byte for byte.
func TestSnapshotExportImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "ws")
	makeDirTree(t, src)

	snapA, err := snapshot.Open(snapshot.Options{Dir: filepath.Join(t.TempDir(), "a")})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := snapA.Create(ctx, src, nil, "ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	var exported bytes.Buffer
	if err := snapA.Export(ctx, sn.ID, &exported); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, "file://"+filepath.Join(t.TempDir(), "archive"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Put(ctx, "org1", "sandbox-1", bytes.NewReader(exported.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if m.Files != sn.Files || m.Dirs != sn.Dirs || m.Symlinks != sn.Symlinks || m.TotalBytes != sn.TotalBytes {
		t.Errorf("archive has %d files, %d dirs, %d symlinks, %d bytes; the snapshot %d, %d, %d, %d",
			m.Files, m.Dirs, m.Symlinks, m.TotalBytes, sn.Files, sn.Dirs, sn.Symlinks, sn.TotalBytes)
	}

	checkImport(t, s, "org1", m.ID, src)

	// The incremental way: the snapshot's manifest (SnapshotService Get)
	// gives every file's sha256; only contents the org lacks are read.
	_, entries, err := snapA.Get(ctx, sn.ID)
	if err != nil {
		t.Fatal(err)
	}
	es := fromSnapshot(entries)
	var opens atomic.Int32
	open := func(_ context.Context, e Entry) (io.ReadCloser, error) {
		opens.Add(1)
		return os.Open(filepath.Join(src, filepath.FromSlash(e.Path)))
	}
	m2, err := s.PutEntries(ctx, "org2", "sandbox-2", es, open)
	if err != nil {
		t.Fatal(err)
	}
	if opens.Load() == 0 || m2.NewBytes != m.TotalBytes {
		t.Errorf("PutEntries into a new org opened %d files, uploaded %d bytes of %d", opens.Load(), m2.NewBytes, m.TotalBytes)
	}
	checkImport(t, s, "org2", m2.ID, src)
	opens.Store(0)
	m3, err := s.PutEntries(ctx, "org2", "sandbox-2", es, open)
	if err != nil || opens.Load() != 0 || m3.NewBytes != 0 {
		t.Errorf("PutEntries again = %v (opened %d files, uploaded %+v bytes); want nothing read", err, opens.Load(), m3)
	}
}

// checkImport restores archive id into a fresh snapshot store through
// Import, then into a new directory, and compares it with src.
func checkImport(t *testing.T, s *Store, org, id, src string) {
	t.Helper()
	ctx := context.Background()
	// Restore streams straight into Import, as the hub will feed a
	// sandbox's agentd.
	pr, pw := io.Pipe()
	go func() {
		_, err := s.Restore(ctx, org, id, pw)
		pw.CloseWithError(err)
	}()
	snapB, err := snapshot.Open(snapshot.Options{Dir: filepath.Join(t.TempDir(), "b")})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	imp, err := snapB.Import(ctx, pr, "restored", dst)
	if err != nil {
		t.Fatalf("Import of the restored stream: %v", err)
	}
	if len(imp.Skipped) != 0 {
		t.Errorf("Import skipped %v", imp.Skipped)
	}
	if _, err := snapB.Restore(ctx, imp.ID, dst, false, nil); err != nil {
		t.Fatal(err)
	}
	want := listTree(t, src)
	if len(want) < 25 {
		t.Fatalf("the source tree has only %d paths", len(want))
	}
	if diff := cmp.Diff(want, listTree(t, dst)); diff != "" {
		t.Errorf("restored tree (-original +restored):\n%s", diff)
	}
}

// makeDirTree writes a small workspace: nested directories (one empty),
// files of several sizes and modes, symlinks; modification times on
// whole seconds (a tar export keeps seconds).
func makeDirTree(t *testing.T, root string) {
	t.Helper()
	for _, es := range workspace(9, 20) {
		p := filepath.Join(root, es.Name)
		switch {
		case strings.HasSuffix(es.Name, "/"):
			must(t, os.MkdirAll(p, fs.FileMode(es.Mode)))
		case es.Link != "":
			must(t, os.Symlink(es.Link, p))
		default:
			must(t, os.WriteFile(p, []byte(es.Data), 0o644))
		}
	}
	must(t, os.MkdirAll(filepath.Join(root, "empty", "deeper"), 0o750))
	must(t, os.WriteFile(filepath.Join(root, "src", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Chmod(filepath.Join(root, "src", "run.sh"), 0o4755))
	must(t, os.WriteFile(filepath.Join(root, "secret"), nil, 0o600))
	must(t, os.Symlink("../src", filepath.Join(root, "data", "up")))
	mt := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, mt, mt)
	}))
}

// treeEntry is what a tree comparison looks at.
type treeEntry struct {
	Mode    fs.FileMode
	Content string // a file's bytes, a symlink's target
	MTime   time.Time
}

// listTree reads a tree: every path, its type and permission bits, its
// content or link target, and (for files) its modification time.
func listTree(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := treeEntry{Mode: fi.Mode()}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Content, e.MTime = string(b), fi.ModTime().UTC()
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Content, err = os.Readlink(p)
			if err != nil {
				return err
			}
		}
		out[rel] = e
		return nil
	}))
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
