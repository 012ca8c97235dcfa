package hub

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The two providers: a file under a directory (never outside it) and a
// credential-helper command (its stdout; its stderr, not the value, in
// errors).
func TestSecretProviders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "team"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "team", "k"), []byte("v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "outside"), []byte("no"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := DirSecrets{Dir: dir}
	if b, err := d.Resolve(t.Context(), "team/k"); err != nil || string(b) != "v1" {
		t.Errorf("DirSecrets team/k = %q, %v", b, err)
	}
	if _, err := d.Resolve(t.Context(), "team/none"); !errors.Is(err, ErrNoSecret) {
		t.Errorf("a missing file: %v, want ErrNoSecret", err)
	}
	for _, ref := range []string{"../outside", "/etc/passwd", "team/../../outside", "team//k", "", "a b"} {
		if _, err := d.Resolve(t.Context(), ref); err == nil || !strings.Contains(err.Error(), "secret reference") {
			t.Errorf("DirSecrets %q: %v, want a refused reference", ref, err)
		}
	}

	c := CommandSecrets{Argv: []string{"sh", "-c", `case "$0" in ok/*) printf 'val-%s\n' "$0" ;; *) echo "nope: $0" >&2; echo leaked; exit 3 ;; esac`}}
	if b, err := c.Resolve(t.Context(), "ok/x"); err != nil || string(b) != "val-ok/x" {
		t.Errorf("CommandSecrets ok/x = %q, %v", b, err)
	}
	_, err := c.Resolve(t.Context(), "bad")
	if err == nil || !strings.Contains(err.Error(), "nope: bad") || strings.Contains(err.Error(), "leaked") {
		t.Errorf("a failing helper: %v; want its stderr, never its stdout", err)
	}
}
