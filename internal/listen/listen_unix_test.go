//go:build unix

package listen

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenUnixPrivateAndStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.sock")
	a, err := Parse("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("socket mode %v, want 0600", got)
	}
	if _, err := Listen(a); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "another agentd is already serving") {
		t.Errorf("second Listen: %v, want an already serving error (ErrInUse)", err)
	}
	if !Serving(path) {
		t.Errorf("Serving(%s) = false while it is served", path)
	}
	// A stale socket: the file stays, nobody listens.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if Serving(path) {
		t.Errorf("Serving(%s) = true for a stale socket", path)
	}
	l, err = Listen(a)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l.Close()
}

// A file that is not a socket is never removed to make room for one.
func TestListenRefusesToReplaceAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(Addr{"unix", path})
	if err == nil {
		l.Close()
		t.Fatal("Listen replaced a regular file with a socket")
	}
	if !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("error %q, want it to say the path is not a socket", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Errorf("the file after Listen: %q, %v; want it untouched", b, err)
	}
}

func TestParseBarePath(t *testing.T) {
	for _, s := range []string{"/run/agentd.sock", "./agentd.sock"} {
		a, err := Parse(s)
		if err != nil || a.Network != "unix" || a.Address != s {
			t.Errorf("Parse(%q) = %v, %v; want unix %s", s, a, err, s)
		}
	}
	if _, err := Parse("agentd.sock"); err == nil {
		t.Error(`Parse("agentd.sock") succeeded; want an error`)
	}
}
