package hub_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// openArchive opens a file:// archive store in a new directory; its
// directory is returned too (to damage a blob).
func openArchive(t *testing.T) (*archive.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := archive.Open(t.Context(), (&url.URL{Scheme: "file", Path: dir}).String(), archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// workspaceScript fills /workspace with what a round trip must keep:
// nested directories, files of several modes and fixed times, an empty
// file, a symlink, a binary blob.
const workspaceScript = `set -e
mkdir -p /workspace/src/deep /workspace/priv
echo 'package main' > /workspace/src/main.go
printf '#!/bin/sh\necho hi\n' > /workspace/src/run.sh && chmod 755 /workspace/src/run.sh
: > /workspace/src/empty && chmod 600 /workspace/src/empty
head -c 2000000 /dev/urandom > /workspace/src/deep/blob.bin && chmod 640 /workspace/src/deep/blob.bin
chmod 700 /workspace/priv && echo secret > /workspace/priv/key
ln -s src/main.go /workspace/link
touch -h -d '2024-01-02 03:04:05' /workspace/src/main.go /workspace/src/deep/blob.bin /workspace/link /workspace/src/deep
`

// signatureScript describes every entry of /workspace: path, type, mode,
// owner, mtime (whole seconds), symlink target, and each file's sha256.
const signatureScript = `cd /workspace && find . -mindepth 1 ! -path './.agentd*' -printf '%p %y %m %U:%G %TY%Tm%Td%TH%TM%TS %l\n' | sed 's/\.[0-9]* / /' | sort && find . -type f ! -path './.agentd*' -exec sha256sum {} + | sort`

// signature is the workspace's description, through a call.
func (h *sandboxHub) signature(ctx context.Context) string {
	h.t.Helper()
	out, code, err := h.run(ctx, "sh", "-c", signatureScript)
	if err != nil || code != 0 {
		h.t.Fatalf("describe the workspace: exit %d %v: %s", code, err, out)
	}
	return out
}

// assertArchived checks that sandbox id is archived in the row, with an
// archive the store has, and that its container and volume are gone.
func (h *sandboxHub) assertArchived(id string, st *archive.Store) store.Sandbox {
	h.t.Helper()
	sb, err := h.Store.Sandbox(h.t.Context(), id)
	if err != nil || sb.State != store.SandboxArchived || sb.ArchiveID == "" || sb.ContainerID != "" {
		h.t.Fatalf("row of the archived sandbox: %+v %v", sb, err)
	}
	if _, err := st.Get(h.t.Context(), sb.OrgID, sb.ArchiveID); err != nil {
		h.t.Errorf("the archive of %s: %v", id, err)
	}
	// Recorded first, removed after: the removal may still be under way.
	pollUntil(h.t, 10*time.Second, "the archived sandbox's container and volume gone", func() (bool, string) {
		_, err := h.driver.Inspect(h.t.Context(), "agentd-"+id)
		vols, verr := h.driver.Volumes(h.t.Context(), map[string]string{sandbox.LabelID: id})
		return errors.Is(err, sandbox.ErrNotFound) && verr == nil && len(vols) == 0, fmt.Sprintf("container: %v; volumes %v %v", err, vols, verr)
	})
	return sb
}

// archives lists the org's archives in the store.
func (h *sandboxHub) archives(st *archive.Store) []string {
	h.t.Helper()
	ids, err := st.List(h.t.Context(), h.Org.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return ids
}

// Archive and restore on the engine, through agentctl and calls: a running
// sandbox is archived (stopped first; its container and volume removed;
// sandbox ls says archived, with its size and no policy step), restored by
// request (running again, the archive deleted) with every file back
// byte for byte with its mode, owner, time and symlink; archived again from
// stopped, it is restored by the conversation's next call, whose record
// says so; archived once more, sandbox rm removes it and its archive.
func TestSandboxArchiveRestore(t *testing.T) {
	st, _ := openArchive(t)
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.Archive = st })
	ctl := h.agentctl()
	c1 := h.ctx("builtin", "c-arch")
	if out, code, err := h.run(c1, "sh", "-c", workspaceScript); err != nil || code != 0 {
		t.Fatalf("fill the workspace: exit %d %v: %s", code, err, out)
	}
	want := h.signature(c1)
	if !strings.Contains(want, "./link l 777 1000:1000 20240102030405 src/main.go") || !strings.Contains(want, "./src/run.sh f 755 1000:1000") {
		t.Fatalf("the workspace's description is not what the test expects: %s", want)
	}
	id := h.sandboxOf(c1)

	code, out, errOut := ctl("sandbox", "archive", id)
	if code != 0 || out != id+" archived (was running)\n" {
		t.Fatalf("sandbox archive: exit %d %q %q", code, out, errOut)
	}
	sb := h.assertArchived(id, st)
	if sb.WorkspaceBytes < 2000000 || sb.WorkspaceBytes > 2100000 {
		t.Errorf("archived workspace size %d, want about 2 MB", sb.WorkspaceBytes)
	}
	code, out, _ = ctl("--json", "sandbox", "ls")
	if code != 0 || !strings.Contains(out, `"state":"archived"`) {
		t.Errorf("sandbox ls --json: exit %d %q; want an archived sandbox", code, out)
	}
	if code, out, _ := ctl("sandbox", "archive", id); code != 0 || out != id+" archived (was archived)\n" {
		t.Errorf("archive of an archived sandbox: exit %d %q", code, out)
	}
	if code, _, errOut := ctl("sandbox", "pause", id); code == 0 || !strings.Contains(errOut, "archived") {
		t.Errorf("pause of an archived sandbox: exit %d %q; want refused", code, errOut)
	}

	code, out, errOut = ctl("sandbox", "restore", id)
	if code != 0 || !strings.HasPrefix(out, id+" running (was archived; back in ") {
		t.Fatalf("sandbox restore: exit %d %q %q", code, out, errOut)
	}
	if got := h.signature(h.byID(id)); got != want {
		t.Errorf("the restored workspace differs:\n got %s\nwant %s", got, want)
	}
	if ids := h.archives(st); len(ids) != 0 {
		t.Errorf("archives after the restore: %v, want none", ids)
	}

	// Stopped → archived; the conversation's call restores it.
	if code, out, errOut := ctl("sandbox", "stop", id); code != 0 {
		t.Fatalf("sandbox stop: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := ctl("sandbox", "archive", id); code != 0 || out != id+" archived (was stopped)\n" {
		t.Fatalf("archive of a stopped sandbox: exit %d %q %q", code, out, errOut)
	}
	h.assertArchived(id, st)
	if got := h.signature(c1); got != want {
		t.Errorf("the workspace after a call restored it differs:\n got %s\nwant %s", got, want)
	}
	if got := h.sandboxOf(c1); got != id {
		t.Errorf("the conversation reached %s after the restore, want %s", got, id)
	}
	h.activityNote(id, "resumed from archived in ")

	// Archived → deleted by sandbox rm: its archive goes too.
	if code, out, errOut := ctl("sandbox", "archive", id); code != 0 {
		t.Fatalf("archive: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := ctl("sandbox", "rm", id); code != 0 {
		t.Fatalf("sandbox rm of an archived sandbox: exit %d %q %q", code, out, errOut)
	}
	if _, err := h.Store.Sandbox(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("row after rm: %v, want gone", err)
	}
	if ids := h.archives(st); len(ids) != 0 {
		t.Errorf("archives after rm: %v, want none", ids)
	}
}

// The policy on the engine: an idle sandbox is stopped, then archived (its
// row says why, sandbox ls said "archives in"), and the delete policy
// removes an archived one with its archive. A hub restart in between
// restores nothing by itself: the archived sandbox stays archived.
func TestSandboxArchivePolicy(t *testing.T) {
	st, _ := openArchive(t)
	h := startSandboxHub(t, func(o *sandboxes.Options) {
		o.Archive, o.PauseAfter, o.StopAfter, o.ArchiveAfter = st, store.Never, 2*time.Second, 5*time.Second
	})
	c := h.ctx("builtin", "c-idle")
	if _, code, err := h.run(c, "sh", "-c", "echo kept > /workspace/f"); err != nil || code != 0 {
		t.Fatalf("write: exit %d %v", code, err)
	}
	id := h.sandboxOf(c)
	h.awaitState(id, store.SandboxStopped, sandbox.StateExited, 10*time.Second)
	var next string
	for _, s := range h.listSandboxes() {
		if s.GetId() == id {
			next = s.GetNextStep()
		}
	}
	if !strings.HasPrefix(next, "archives in ") {
		t.Errorf("next step of the stopped sandbox: %q, want archives in …", next)
	}
	pollUntil(t, 20*time.Second, "the idle sandbox archived", func() (bool, string) {
		sb, err := h.Store.Sandbox(t.Context(), id)
		return err == nil && sb.State == store.SandboxArchived, sb.State
	})
	sb := h.assertArchived(id, st)
	if sb.StateReason != "idle 5s" {
		t.Errorf("archived for %q, want idle 5s", sb.StateReason)
	}
	h.Stop()
	h.Serve(h.Addr)
	time.Sleep(time.Second)
	h.assertArchived(id, st)
	if out, code, err := h.run(c, "cat", "/workspace/f"); err != nil || code != 0 || out != "kept\n" {
		t.Fatalf("the conversation after a restart: %q exit %d %v, want kept", out, code, err)
	}

	// The delete policy removes archived sandboxes, and their archives.
	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	if _, err := envs.ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: "archive"}); err != nil {
		t.Fatal(err)
	}
	never, del := "never", "10s"
	if _, err := envs.SetEnvironmentPolicy(h.ctx("", ""), &hubv1.SetEnvironmentPolicyRequest{Name: "builtin", ArchiveAfter: &never, DeleteAfter: &del}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "the archived sandbox deleted by the policy", func() (bool, string) {
		_, err := h.Store.Sandbox(t.Context(), id)
		return errors.Is(err, store.ErrNotFound), ""
	})
	pollUntil(t, 5*time.Second, "its archive deleted", func() (bool, string) {
		ids := h.archives(st)
		return len(ids) == 0, strings.Join(ids, ",")
	})
}

// Refusals leave the sandbox as it was: an archive past --org-max-archive
// is RESOURCE_EXHAUSTED naming the limit and the flag, and the sandbox
// stays stopped with its volume; a damaged blob makes the restore fail
// naming the file, the sandbox stays archived and nothing is served from
// it; once the blob is whole again, the restore succeeds.
func TestSandboxArchiveRefusals(t *testing.T) {
	st, dir := openArchive(t)
	var maxArchive int64 = 1 << 20
	h := startSandboxHub(t, func(o *sandboxes.Options) { o.Archive, o.OrgMaxArchive = st, maxArchive })
	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	big := h.ctx("builtin", "c-big")
	if _, code, err := h.run(big, "sh", "-c", "head -c 3000000 /dev/urandom > /workspace/blob"); err != nil || code != 0 {
		t.Fatalf("write: exit %d %v", code, err)
	}
	bigID := h.sandboxOf(big)
	_, err := envs.ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: bigID, Action: "archive"})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--org-max-archive") || !strings.Contains(err.Error(), "1.0 MiB") {
		t.Fatalf("archive past the limit: %v; want RESOURCE_EXHAUSTED naming 1.0 MiB and --org-max-archive", err)
	}
	h.awaitState(bigID, store.SandboxStopped, sandbox.StateExited, 5*time.Second)
	if ids := h.archives(st); len(ids) != 0 {
		t.Errorf("archives after a refusal: %v, want none", ids)
	}
	if out, code, err := h.run(big, "sh", "-c", "wc -c < /workspace/blob"); err != nil || code != 0 || strings.TrimSpace(out) != "3000000" {
		t.Errorf("the refused sandbox's workspace: %q exit %d %v", out, code, err)
	}

	small := h.ctx("builtin", "c-small")
	if _, code, err := h.run(small, "sh", "-c", "mkdir /workspace/d && echo precious > /workspace/d/f"); err != nil || code != 0 {
		t.Fatalf("write: exit %d %v", code, err)
	}
	id := h.sandboxOf(small)
	if _, err := envs.ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: "archive"}); err != nil {
		t.Fatal(err)
	}
	h.assertArchived(id, st)
	// precious\n's blob, damaged in place.
	var blob string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "/blobs/") {
			if b, _ := os.ReadFile(p); string(b) == "precious\n" {
				blob = p
			}
		}
		return nil
	})
	if blob == "" {
		t.Fatal("no blob holds the file's content")
	}
	if err := os.WriteFile(blob, []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = envs.ChangeSandboxState(h.ctx("", ""), &hubv1.ChangeSandboxStateRequest{Id: id, Action: "restore"})
	if err == nil || !strings.Contains(err.Error(), "d/f") {
		t.Fatalf("restore of a damaged archive: %v; want an error naming d/f", err)
	}
	if _, _, err := h.run(h.byID(id), "cat", "/workspace/d/f"); err == nil {
		t.Errorf("a call to the sandbox whose archive is damaged ran")
	}
	h.assertArchived(id, st)
	if err := os.WriteFile(blob, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code, err := h.run(small, "cat", "/workspace/d/f"); err != nil || code != 0 || out != "precious\n" {
		t.Errorf("after the blob is whole again: %q exit %d %v", out, code, err)
	}
}

// Archive and restore under each isolation (runc, gVisor): the engine
// copies the workspace whatever the runtime, and a call restores it.
func TestSandboxArchiveIsolations(t *testing.T) {
	st, _ := openArchive(t)
	isolations(t, func(o *sandboxes.Options) { o.Archive = st }, func(t *testing.T, iso string, h *sandboxHub) {
		c := h.ctx("builtin", "c-"+iso)
		if out, code, err := h.run(c, "sh", "-c", workspaceScript); err != nil || code != 0 {
			t.Fatalf("fill the workspace: exit %d %v: %s", code, err, out)
		}
		want := h.signature(c)
		id := h.sandboxOf(c)
		if code, out, errOut := h.agentctl()("sandbox", "archive", id); code != 0 {
			t.Fatalf("archive: exit %d %q %q", code, out, errOut)
		}
		h.assertArchived(id, st)
		if got := h.signature(c); got != want {
			t.Errorf("%s: the restored workspace differs:\n got %s\nwant %s", iso, got, want)
		}
		h.checkKernel(t, c, iso)
	})
}
