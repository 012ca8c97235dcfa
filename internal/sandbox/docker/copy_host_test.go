//go:build linux

package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
)

// writeTree is what the source sandbox writes (as uid 1000) before it is
// paused: modes, an old modification time, a symlink out of the
// workspace, a hard link, an empty directory, a dot file, and the
// workspace root's own mode.
const writeTree = `set -e
mkdir -p /workspace/d/e /workspace/empty
printf one > /workspace/d/f
chmod 640 /workspace/d/f
chmod 750 /workspace/d
ln -s /etc /workspace/escape
ln -s d/f /workspace/l
ln /workspace/d/f /workspace/d/e/hard
printf dot > /workspace/.hidden
TZ=UTC touch -d "2020-01-02 03:04:05" /workspace/d/f /workspace/d
chmod 770 /workspace
touch /tmp/done
exec sleep 300`

// treeEntry is one file of a workspace as seen on the host.
type treeEntry struct {
	Mode     fs.FileMode
	UID, GID uint32
	MTime    int64 // seconds; directories too
	Links    uint64
	Target   string // a symlink's
	Sum      string // a regular file's sha256
}

// hostTree lists the tree under dir from the host (the test is root).
func hostTree(t *testing.T, dir string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st := fi.Sys().(*syscall.Stat_t)
		e := treeEntry{Mode: fi.Mode(), UID: st.Uid, GID: st.Gid, Links: uint64(st.Nlink)}
		// Not a symlink's own time: busybox's cp -a in the helper does
		// not keep it (GNU cp on the host does).
		if fi.Mode()&fs.ModeSymlink == 0 {
			e.MTime = fi.ModTime().Unix()
		}
		if fi.IsDir() {
			e.Links = 0 // counts subdirectories: the same either way
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Target, err = os.Readlink(p)
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			sum := sha256.Sum256(b)
			e.Sum = hex.EncodeToString(sum[:])
		}
		out[rel] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CopyWorkspace on the host (the engine local, the test root) and through
// the helper container give the same tree: the source's, owners, modes,
// times, links and the root's mode included, and nothing of what the
// destination held before; a write into the copy does not show in the
// source. The counters say which way each copy went, so that the host
// path cannot silently fall back to the helper.
func TestCopyWorkspaceHostAndHelper(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the host copy needs root (the engine's volumes are root's)")
	}
	host := engine(t)
	helper, err := New(Options{Logger: zaptest.NewLogger(t), CopyInHelper: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Close() })
	image := "agentd-test/forkcopy:" + uniqueName(t)
	testImage(t, host, image, true, 1000)

	src := testSpec(t, uniqueName(t), image, writeTree)
	sid := create(t, host, src)
	if err := host.Start(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	poll(t, "the source to write its tree", func() bool {
		_, code := execIn(t, host, sid, "test -e /tmp/done")
		return code == 0
	})
	if err := host.Pause(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Unpause(cleanupCtx(t), sid) })
	srcDir := volumeDir(t, host, sid)
	want := hostTree(t, srcDir)
	if e := want["escape"]; e.Target != "/etc" || want["."].Mode.Perm() != 0o770 || want["d/f"].Links != 2 {
		t.Fatalf("the source's tree is not what the test wrote: %+v", want)
	}

	for _, c := range []struct {
		name           string
		d              *Driver
		hosts, helpers int64
	}{
		{"host", host, 1, 0},
		{"helper", helper, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			did := create(t, c.d, testSpec(t, uniqueName(t), image, "true"))
			dstDir := volumeDir(t, c.d, did)
			if err := os.WriteFile(filepath.Join(dstDir, "stale"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			h0, p0 := c.d.hostCopies.Load(), c.d.helpers.Load()
			if err := c.d.CopyWorkspace(t.Context(), sid, did); err != nil {
				t.Fatalf("CopyWorkspace: %v", err)
			}
			if h, p := c.d.hostCopies.Load()-h0, c.d.helpers.Load()-p0; h != c.hosts || p != c.helpers {
				t.Errorf("copies on the host %d, helper containers %d; want %d, %d", h, p, c.hosts, c.helpers)
			}
			if diff := cmp.Diff(hostTree(t, dstDir), want); diff != "" {
				t.Errorf("the copy's tree (-got +want):\n%s", diff)
			}
			if err := os.WriteFile(filepath.Join(dstDir, "d", "f"), []byte("fork"), 0o640); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(srcDir, "d", "f")); err != nil || string(b) != "one" {
				t.Errorf("the source's d/f after a write into the copy: %q, %v; want \"one\"", b, err)
			}
			if diff := cmp.Diff(hostTree(t, srcDir), want); diff != "" {
				t.Errorf("the source after the copy (-got +want):\n%s", diff)
			}
		})
	}
}

// A driver that cannot see the engine's volumes here (an engine on a tcp
// address), or is told to use the helper, or whose volumes are missing,
// copies through the helper.
func TestCopyWorkspaceHostDirsRefused(t *testing.T) {
	d := engine(t)
	for name, o := range map[string]Options{
		"remote engine":    {Host: "tcp://192.0.2.1:2375"},
		"helper asked for": {CopyInHelper: true},
	} {
		dd, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := dd.hostDirs(t.Context(), "x", "a", "b"); ok {
			t.Errorf("%s: hostDirs ok, want the helper", name)
		}
		_ = dd.Close()
	}
	if _, _, ok := d.hostDirs(t.Context(), "agentd-test-absent", "agentd-test-absent-a", "agentd-test-absent-b"); ok {
		t.Error("hostDirs of missing volumes: ok, want the helper")
	}
}
