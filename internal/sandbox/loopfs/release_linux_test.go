package loopfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// needLoop skips a test that cannot make loop devices here.
func needLoop(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices and mount need root")
	}
	if _, err := os.Stat(LoopControl); err != nil {
		t.Skipf("no loop devices: %v", err)
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4 (e2fsprogs)")
	}
}

// Release takes everything Make, Attach and a mount left, frozen file
// system included, and a second Release finds nothing and says nil.
func TestRelease(t *testing.T) {
	needLoop(t)
	dir := t.TempDir()
	img, dev, mp := filepath.Join(dir, "w.img"), filepath.Join(dir, "w.dev"), filepath.Join(dir, "w")
	if err := Make(t.Context(), img, MinBytes, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	loop, err := Attach(LoopControl, img, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Release(img, dev) }) // should the test stop early
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Mount(loop, mp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mp, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Frozen, as a hub that died mid-copy leaves it; and the symlink an
	// Attach cut short leaves.
	freeze(t, mp)
	if err := os.Symlink(loop, dev+".new"); err != nil {
		t.Fatal(err)
	}

	if err := Release(img, dev); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := LoopOf(img, dev); got != "" {
		t.Errorf("LoopOf after Release = %q, want none", got)
	}
	if b := Backing(loop); b == img {
		t.Errorf("%s still holds %s", loop, img)
	}
	var st, parent unix.Stat_t
	if err := unix.Stat(mp, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(dir, &parent); err != nil {
		t.Fatal(err)
	}
	if st.Dev != parent.Dev {
		t.Errorf("%s is still a mount point (device %d, its parent's %d)", mp, st.Dev, parent.Dev)
	}
	for _, p := range []string{img, dev, dev + ".new"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Release: %v, want it gone", p, err)
		}
	}
	if err := Release(img, dev); err != nil {
		t.Errorf("Release of nothing: %v", err)
	}
}

// Release joins what fails and still does the rest: a dev that is a
// directory with content cannot be removed, the image still is.
func TestReleaseJoinsErrors(t *testing.T) {
	dir := t.TempDir()
	img, dev := filepath.Join(dir, "w.img"), filepath.Join(dir, "w.dev")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dev, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Release(img, dev); err == nil {
		t.Error("Release with an unremovable dev: nil error")
	}
	if _, err := os.Lstat(img); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the image after Release: %v, want it gone", err)
	}
}

// freeze freezes the file system at mp and closes what it opened: it
// stays frozen, as one whose freezer died.
func freeze(t *testing.T, mp string) {
	t.Helper()
	f, err := os.Open(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), fiFreeze, 0); err != nil {
		t.Fatalf("freeze %s: %v", mp, err)
	}
	t.Cleanup(func() { Thaw(mp) })
}
