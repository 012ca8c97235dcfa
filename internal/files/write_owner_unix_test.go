//go:build unix

package files

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteKeepsOwner needs root to give a file another owner.
func TestWriteKeepsOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	f, ws := newTestFS(t)
	p := filepath.Join(ws, "owned")
	writeFiles(t, ws, map[string]string{"owned": "x"})
	if err := os.Chown(p, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(t.Context(), p, WriteOptions{}, strings.NewReader("y")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234 || st.Gid != 5678 || fi.Mode()&modeBits != 0o755|fs.ModeSetuid {
		t.Errorf("after write: uid %d gid %d mode %v; want 1234 5678 -rwsr-xr-x", st.Uid, st.Gid, fi.Mode())
	}
}
