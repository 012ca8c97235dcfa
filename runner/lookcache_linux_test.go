package runner

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOnReadOnlyRoot checks which lookups the cache may remember: those
// that stay on the root mount (found or missing), not those that reach
// another mount, directly or through a symbolic link.
func TestOnReadOnlyRoot(t *testing.T) {
	t.Parallel()
	rootDev := devOf(t, "/")
	type tc struct {
		name, path string
		want       bool
	}
	cases := []tc{
		{"missing on the root", "/nonexistent-agentd-test/bin/prog", true},
		{"another mount (/proc)", "/proc/version", false},
		{"missing on another mount", "/proc/nonexistent-agentd-test", false},
	}
	// A directory of the root mount itself, where the test can write, for
	// the cases with files and links; the temp dir is often another mount.
	if dir := t.TempDir(); devOf(t, dir) == rootDev && mountID(t, dir) == mountID(t, "/") {
		file := filepath.Join(dir, "prog")
		writeExecutable(t, file)
		toProc := filepath.Join(dir, "to-proc")
		toFile := filepath.Join(dir, "to-file")
		for link, target := range map[string]string{toProc: "/proc/version", toFile: file} {
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
		}
		cases = append(cases,
			tc{"file on the root", file, true},
			tc{"link to a file on the root", toFile, true},
			tc{"link to another mount", toProc, false})
	} else {
		t.Logf("%s is not on the root mount: the cases with files and links are skipped", dir)
	}
	for _, c := range cases {
		if got := onReadOnlyRoot(c.path); got != c.want {
			t.Errorf("%s: onReadOnlyRoot(%s) = %v, want %v", c.name, c.path, got, c.want)
		}
	}
}

// TestNewLookCacheWritableRoot checks that nothing is cached where the
// root is writable.
func TestNewLookCacheWritableRoot(t *testing.T) {
	t.Parallel()
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		t.Fatal(err)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		t.Skip("the root is read-only here")
	}
	if c := newLookCache(); c != nil {
		t.Error("newLookCache() on a writable root is not nil")
	}
}

func devOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Dev
}

// mountID is the id of the mount path is on (statx STATX_MNT_ID), or 0
// where the kernel does not report it.
func mountID(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mnt_id
}
