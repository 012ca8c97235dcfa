package hub_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
)

// A restore keeps a basis for the next archive (what it wrote, and
// when), which reads the stopped sandbox's volume directly; a file
// rewritten after the restore with its size and mtime put back (a stat
// cache of mtimes would take it as unchanged) is read again and archived
// with its new content, an untouched one keeps its sha256, and the
// basis is gone once the workspace is archived.
func TestSandboxRearchiveBasis(t *testing.T) {
	st, _ := openArchive(t)
	keys := filepath.Join(t.TempDir(), "keys")
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.Archive, o.KeyDir = st, keys })
	ctl := h.agentctl()
	c := h.ctx("builtin", "c-basis")
	if out, code, err := h.run(c, "sh", "-c", "echo aaaa > /workspace/same && echo bbbb > /workspace/sneaky && touch -d '2024-01-02 03:04:05' /workspace/same /workspace/sneaky"); err != nil || code != 0 {
		t.Fatalf("fill the workspace: exit %d %v: %s", code, err, out)
	}
	id := h.sandboxOf(c)
	basis := filepath.Join(keys, id, "archive-basis.json")
	for _, step := range [][]string{{"archive", id}, {"restore", id}} {
		if code, out, errOut := ctl(append([]string{"sandbox"}, step...)...); code != 0 {
			t.Fatalf("sandbox %v: exit %d %q %q", step, code, out, errOut)
		}
	}
	if _, err := os.Stat(basis); err != nil {
		t.Fatalf("the restore kept no basis: %v", err)
	}
	if out, code, err := h.run(h.byID(id), "sh", "-c", "echo cccc > /workspace/sneaky && touch -d '2024-01-02 03:04:05' /workspace/sneaky"); err != nil || code != 0 {
		t.Fatalf("rewrite: exit %d %v: %s", code, err, out)
	}
	for _, step := range []string{"stop", "archive"} {
		if code, out, errOut := ctl("sandbox", step, id); code != 0 {
			t.Fatalf("sandbox %s: exit %d %q %q", step, code, out, errOut)
		}
	}
	sb := h.assertArchived(id, st)
	m, err := st.Get(t.Context(), sb.OrgID, sb.ArchiveID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range m.Entries {
		if e.Type == archive.TypeFile {
			got[e.Path] = e.SHA256
		}
	}
	for path, content := range map[string]string{"same": "aaaa\n", "sneaky": "cccc\n"} {
		if sum := sha256.Sum256([]byte(content)); got[path] != hex.EncodeToString(sum[:]) {
			t.Errorf("%s archived with sha256 %s, want that of %q", path, got[path], content)
		}
	}
	if _, err := os.Stat(basis); !os.IsNotExist(err) {
		t.Errorf("the basis after the archive: %v, want it gone", err)
	}
	if out, code, err := h.run(c, "cat", "/workspace/sneaky"); err != nil || code != 0 || out != "cccc\n" {
		t.Errorf("after the next restore: exit %d %v %q", code, err, out)
	}
}
