package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

func zapNop() *zap.Logger { return zap.NewNop() }

// newTestStore opens a store in a fresh directory. Unless opts says
// otherwise, files count as settled as soon as they are written
// (RacyWindow 1 ns), so that tests need not wait for the clock.
func newTestStore(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "store")
	}
	if opts.RacyWindow == 0 {
		opts.RacyWindow = time.Nanosecond
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countingOpen returns an Open hook that counts the files opened.
func countingOpen(n *atomic.Int64) func(string) (File, error) {
	return func(name string) (File, error) {
		n.Add(1)
		f, err := openSource(name)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
}

func writeFile(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// bigContent is n bytes that compress somewhat.
func bigContent(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, seed))
	var b bytes.Buffer
	for b.Len() < n {
		if rng.IntN(4) == 0 {
			for range 64 {
				b.WriteByte(byte(rng.Uint32()))
			}
		} else {
			b.WriteString("the quick brown fox jumps over the lazy dog\n")
		}
	}
	return b.String()[:n]
}

// makeTree fills root with files of several modes and sizes (one larger
// than smallFile, so it is stored loose), symlinks (relative, absolute,
// dangling), empty and private directories, and a name that is not UTF-8.
func makeTree(t *testing.T, root string) {
	t.Helper()
	writeFile(t, filepath.Join(root, "a.txt"), "hello\n", 0o644)
	writeFile(t, filepath.Join(root, "bin", "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	writeFile(t, filepath.Join(root, "secret"), "s", 0o600)
	writeFile(t, filepath.Join(root, "big.bin"), bigContent(1, 3<<20+17), 0o644)
	writeFile(t, filepath.Join(root, "sub", "deep", "x.go"), "package x\n", 0o644)
	writeFile(t, filepath.Join(root, "private", "note"), "n", 0o640)
	writeFile(t, filepath.Join(root, "name\xff.txt"), "latin-1 name", 0o644)
	writeFile(t, filepath.Join(root, "zero"), "", 0o644)
	mkdir(t, filepath.Join(root, "private"), 0o700)
	mkdir(t, filepath.Join(root, "empty"), 0o755)
	mkdir(t, filepath.Join(root, "shared"), 0o2775)
	symlink(t, "a.txt", filepath.Join(root, "link-rel"))
	symlink(t, "/etc/hostname", filepath.Join(root, "link-abs"))
	symlink(t, "nowhere", filepath.Join(root, "link-dangling"))
}

// state is what a path looks like, for comparing trees.
type state struct {
	Type    string
	Mode    fs.FileMode
	SHA256  string
	Target  string
	ModTime time.Time
}

// describe returns every path below root (root excluded) and its state.
// Directory times are left out unless withDirTimes.
func describe(t *testing.T, root string, withDirTimes bool) map[string]state {
	t.Helper()
	out := make(map[string]state)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := state{Mode: fi.Mode()}
		switch {
		case fi.Mode().IsRegular():
			st.Type = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			st.SHA256 = hex.EncodeToString(sum[:])
			st.ModTime = fi.ModTime()
		case fi.IsDir():
			st.Type = "dir"
			if withDirTimes {
				st.ModTime = fi.ModTime()
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			st.Type = "symlink"
			st.Target, _ = os.Readlink(p)
			st.Mode = 0 // meaningless for links
		default:
			st.Type = "other"
		}
		out[filepath.ToSlash(rel)] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storedFiles lists the files holding blobs (loose blobs and packs).
func storedFiles(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{s.blobDir, s.packDir} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				out = append(out, strings.TrimPrefix(p, s.dir+"/"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// storedBytes is the size of the files holding blobs.
func storedBytes(t *testing.T, s *Store) int64 {
	t.Helper()
	var n int64
	for _, p := range storedFiles(t, s) {
		fi, err := os.Stat(filepath.Join(s.dir, p))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// assertEmptyStore fails unless the store holds no snapshot, no blob and
// no temporary file.
func assertEmptyStore(t *testing.T, s *Store) {
	t.Helper()
	if files := storedFiles(t, s); len(files) != 0 {
		t.Errorf("store holds blobs: %v", files)
	}
	for _, dir := range []string{s.manDir, s.tmpDir} {
		names, err := readNames(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 0 {
			t.Errorf("%s holds %v", dir, names)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.index) != 0 || len(s.packs) != 0 || len(s.pins) != 0 {
		t.Errorf("store remembers %d packed blobs, %d packs, %d pins", len(s.index), len(s.packs), len(s.pins))
	}
}
