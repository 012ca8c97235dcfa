package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
)

// A replica's sandbox hub ID is made once per --sandbox-dir and read back
// on every later start (a restart finds its sandboxes again); two
// directories (two replicas) get two IDs; a damaged file is refused and
// left as it is.
func TestLoadHubID(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	first, err := loadHubID(filepath.Join(dirA, "sub", "hub-id"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sandboxes.ValidHubID(first); err != nil {
		t.Errorf("made %q: %v", first, err)
	}
	again, err := loadHubID(filepath.Join(dirA, "sub", "hub-id"))
	if err != nil || again != first {
		t.Errorf("after a restart: %q, %v; want %q", again, err, first)
	}
	other, err := loadHubID(filepath.Join(dirB, "hub-id"))
	if err != nil || other == first {
		t.Errorf("another replica's dir: %q, %v; want an ID other than %q", other, err, first)
	}

	bad := filepath.Join(dirB, "bad")
	if err := os.WriteFile(bad, []byte("no/slashes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, err := loadHubID(bad); err == nil || !strings.Contains(err.Error(), "delete the file") {
		t.Errorf("damaged file: %q, %v; want an error saying what to do", id, err)
	}
	if b, _ := os.ReadFile(bad); string(b) != "no/slashes\n" {
		t.Errorf("damaged file changed to %q", b)
	}
}
