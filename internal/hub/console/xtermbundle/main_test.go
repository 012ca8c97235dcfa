package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestBundleCurrent: the committed static/xterm is what this tool makes
// from the Debian packages installed here (skipped where they are not).
func TestBundleCurrent(t *testing.T) {
	const lib, js, lic = "/usr/share/nodejs/xterm/lib", "/usr/share/javascript/xterm", "/usr/share/doc/libjs-xterm/copyright"
	for _, p := range []string{lib, js, lic} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("Debian's node-xterm and libjs-xterm are not installed: %v", err)
		}
	}
	out := t.TempDir()
	if err := run(lib, js, lic, out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"xterm.js", "xterm.css", "LICENSE"} {
		got, err := os.ReadFile(filepath.Join("..", "static", "xterm", name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("static/xterm/%s differs from what xtermbundle makes now: run go generate ./internal/hub/console", name)
		}
	}
}
