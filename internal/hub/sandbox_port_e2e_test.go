package hub_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// treeListing lists the tree at dir: every path with its mode, type and
// link target, then every file's sha256 — equal listings are
// byte-identical trees with the same modes and symlinks.
const treeListing = `cd "$1" && find . -mindepth 1 -printf '%P %m %y %l\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum`

func hostListing(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "sh", "-c", treeListing, "sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("list %s: %v %s", dir, err, out)
	}
	return string(out)
}

// The portable workspace, laptop ↔ sandbox, through a real paired agentd:
// a machine's snapshot export starts a new conversation's sandbox (sandbox
// create --from), whose /workspace is then exactly the laptop's tree; a
// sandbox's /workspace exported (sandbox archive --export) is imported and
// restored on the machine, identical. A file that is not a tar archive,
// or is cut short, is refused and changes nothing (no sandbox made); an
// existing sandbox's files are not replaced without --force.
func TestSandboxPortableWorkspace(t *testing.T) {
	h := startSandboxHub(t, nil)
	he := &hubEnv{t: t, hub: h.Hub, store: h.Store, owner: h.Token}
	he.sync()
	mc := he.startMachine(h.Token)
	ctl := h.agentctl()
	dir := t.TempDir()

	// The laptop's tree.
	proj := filepath.Join(mc.ws, "proj")
	mk := exec.Command("sh", "-c", strings.Join([]string{
		"mkdir -p proj/src/pkg proj/empty",
		"printf 'package main\\n' > proj/src/main.go",
		"head -c 300000 /dev/urandom > proj/src/pkg/blob.bin",
		"printf '#!/bin/sh\\necho hi\\n' > proj/run.sh && chmod 755 proj/run.sh",
		"echo secret > proj/.env && chmod 600 proj/.env",
		"ln -sf src/main.go proj/main-link && ln -sf ../run.sh proj/src/up",
	}, " && "))
	mk.Dir = mc.ws
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make the laptop's tree: %v %s", err, out)
	}
	want := hostListing(t, proj)

	code, out, errOut := ctl("--machine", mc.id, "snapshot", "create", "proj")
	snap := strings.TrimSpace(out)
	if code != 0 || snap == "" {
		t.Fatalf("machine snapshot create: exit %d %q %q", code, out, errOut)
	}
	laptopTar := filepath.Join(dir, "laptop.tar")
	if code, out, errOut := ctl("--machine", mc.id, "snapshot", "export", snap, "-o", laptopTar); code != 0 {
		t.Fatalf("machine snapshot export: exit %d %q %q", code, out, errOut)
	}

	// Bad files first: refused, no sandbox made.
	notTar := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notTar, []byte(strings.Repeat("not a tar archive\n", 200)), 0o600); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(laptopTar)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.tar")
	if err := os.WriteFile(cut, whole[:len(whole)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{notTar, cut} {
		code, out, errOut := ctl("--env", "builtin", "--conversation", "c-bad", "sandbox", "create", "--from", bad)
		if code == 0 || out != "" || !strings.Contains(errOut, "nothing was changed") {
			t.Errorf("sandbox create --from %s: exit %d %q %q; want refused, nothing changed", filepath.Base(bad), code, out, errOut)
		}
	}
	if _, err := h.Store.ConversationSandbox(t.Context(), h.Org.ID, "builtin", "c-bad"); err == nil {
		t.Errorf("a refused --from made a sandbox")
	}

	// Laptop → sandbox.
	code, out, errOut = ctl("--env", "builtin", "--conversation", "c-port", "sandbox", "create", "--from", laptopTar)
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "sb-") || out != id+"\n" {
		t.Fatalf("sandbox create --from: exit %d %q %q; want the id alone", code, out, errOut)
	}
	sbCtx := h.ctx("builtin", "c-port")
	if got := h.sandboxOf(sbCtx); got != id {
		t.Fatalf("c-port reached %s, want %s", got, id)
	}
	got, code32, err := h.run(sbCtx, "sh", "-c", treeListing, "sh", "/workspace")
	if err != nil || code32 != 0 || got != want {
		t.Errorf("the sandbox's /workspace after --from (exit %d %v):\n%s\nwant the laptop's:\n%s", code32, err, got, want)
	}

	// An existing sandbox with files: refused without --force, unchanged.
	if _, code, err := h.run(sbCtx, "sh", "-c", "echo mine > /workspace/added"); err != nil || code != 0 {
		t.Fatalf("write: %d %v", code, err)
	}
	code, out, errOut = ctl("--env", "builtin", "--conversation", "c-port", "sandbox", "create", "--from", laptopTar)
	if code == 0 || !strings.Contains(errOut, "--force") {
		t.Errorf("--from into a sandbox with files: exit %d %q %q; want refused, naming --force", code, out, errOut)
	}
	if out, _, _ := h.run(sbCtx, "cat", "/workspace/added"); out != "mine\n" {
		t.Errorf("the refused --from changed /workspace/added: %q", out)
	}

	// Without --from: the conversation's sandbox, as it is; with --force:
	// the archive replaces the workspace, files it lacks removed.
	if code, out, errOut := ctl("--env", "builtin", "--conversation", "c-port", "sandbox", "create"); code != 0 || out != id+"\n" {
		t.Errorf("sandbox create of an existing conversation: exit %d %q %q, want its id %s", code, out, errOut, id)
	}
	if code, out, errOut := ctl("--env", "builtin", "--conversation", "c-port", "sandbox", "create", "--from", laptopTar, "--force"); code != 0 || out != id+"\n" {
		t.Fatalf("sandbox create --from --force: exit %d %q %q", code, out, errOut)
	}
	if got, _, err := h.run(sbCtx, "sh", "-c", treeListing, "sh", "/workspace"); err != nil || got != want {
		t.Errorf("the workspace after --force (%v):\n%s\nwant the laptop's:\n%s", err, got, want)
	}

	// Sandbox → laptop: a stopped sandbox's export (the call brings it
	// back), restored on the machine, is identical.
	if _, code, err := h.run(sbCtx, "sh", "-c", "mkdir -p /workspace/out/empty2 && echo fromsb > /workspace/out/r && chmod 700 /workspace/out/r && ln -s out/r /workspace/r-link"); err != nil || code != 0 {
		t.Fatalf("write in the sandbox: %d %v", code, err)
	}
	sbWant, _, err := h.run(sbCtx, "sh", "-c", treeListing, "sh", "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := ctl("sandbox", "stop", id); code != 0 {
		t.Fatalf("sandbox stop: %d %q %q", code, out, errOut)
	}
	sbTar := filepath.Join(dir, "sb.tar")
	code, out, errOut = ctl("sandbox", "archive", id, "--export", sbTar)
	if code != 0 || out != "" {
		t.Fatalf("sandbox archive --export: exit %d %q %q", code, out, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".sb.tar.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	code, out, errOut = ctl("--machine", mc.id, "snapshot", "import", sbTar, "--root", "back")
	back := strings.TrimSpace(out)
	if code != 0 || back == "" {
		t.Fatalf("machine snapshot import: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := ctl("--machine", mc.id, "snapshot", "restore", back); code != 0 {
		t.Fatalf("machine snapshot restore: exit %d %q %q", code, out, errOut)
	}
	if got := hostListing(t, filepath.Join(mc.ws, "back")); got != sbWant {
		t.Errorf("the machine's restore of the sandbox's export:\n%s\nwant the sandbox's /workspace:\n%s", got, sbWant)
	}
	// The export made no snapshot that stays in the sandbox.
	if out, _, _ := h.run(sbCtx, "sh", "-c", "ls /workspace"); strings.Contains(out, ".agentd") {
		t.Errorf("the export left state in /workspace: %q", out)
	}
	// Without --export, archive is the hub's store's, which this hub
	// has not: refused, naming the flag, the sandbox as it was.
	if code, _, errOut := ctl("sandbox", "archive", id); code != 1 || !strings.Contains(errOut, "--archive-url") {
		t.Errorf("sandbox archive without --export on a hub with no archive store: exit %d %q; want 1, naming --archive-url", code, errOut)
	}
	if out, _, err := h.run(sbCtx, "sh", "-c", "ls /workspace"); err != nil || out == "" {
		t.Errorf("the workspace after the refused archive: %q, %v", out, err)
	}
}
