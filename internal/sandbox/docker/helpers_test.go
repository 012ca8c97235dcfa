package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// busyboxPath is Debian's static busybox (package busybox-static); it is
// the whole userland of the test images.
const busyboxPath = "/bin/busybox"

// applets are linked into the test images' /bin.
var applets = []string{
	"sh", "id", "touch", "sleep", "cat", "ls", "stat", "grep", "chmod",
	"echo", "printf", "head", "tr", "false", "mkdir", "rm", "dd", "df",
}

// engine returns a driver on the local engine, or skips the test when the
// engine cannot be reached.
func engine(t *testing.T) *Driver {
	t.Helper()
	d, err := New(Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Ping(t.Context()); errors.Is(err, sandbox.ErrUnavailable) {
		t.Skipf("no docker engine: %v", err)
	} else if err != nil {
		t.Fatalf("Ping: %v", err)
	}
	return d
}

// cleanupCtx is for t.Cleanup, which runs after t.Context is done.
func cleanupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName is a container name no other test run uses.
func uniqueName(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "agentd-test-" + hex.EncodeToString(b)
}

// testImage imports a tiny image as ref: busybox, /etc/passwd with uid 1000,
// and, when workspace is set, a root-owned /workspace holding a file
// "seed". Its config says USER root, an entrypoint and cmd that fail,
// WORKDIR / and a hub label, all of which a sandbox must override. It is removed when the
// test ends.
func testImage(t *testing.T, d *Driver, ref string, workspace bool, owner int) {
	t.Helper()
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		t.Fatalf("the test image needs a static busybox at %s: apt-get install busybox-static (%v)", busyboxPath, err)
	}
	if f, err := elf.NewFile(bytes.NewReader(bb)); err != nil {
		t.Fatalf("%s: %v", busyboxPath, err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Fatalf("%s is dynamically linked: apt-get install busybox-static", busyboxPath)
			}
		}
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) {
		h.ModTime = time.Unix(0, 0)
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755}, nil)
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755}, bb)
	for _, a := range applets {
		add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
	}
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755}, nil)
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644},
		[]byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\n"))
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644},
		[]byte("root:x:0:\nagent:x:1000:\n"))
	if workspace {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755, Uid: owner, Gid: owner}, nil)
		add(&tar.Header{Typeflag: tar.TypeReg, Name: "workspace/seed", Mode: 0o644, Uid: owner, Gid: owner}, []byte("seed\n"))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}

	rc, err := d.cli.ImageImport(t.Context(), client.ImageImportSource{Source: &buf, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{
			"USER root",
			`ENTRYPOINT ["/bin/false"]`,
			`CMD ["entrypoint-and-cmd-must-be-overridden"]`,
			"WORKDIR /",
			"ENV PATH=/bin",
			"LABEL org.example.test=driver " + sandbox.LabelWarm + "=1",
		}})
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	err = readProgress(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	t.Cleanup(func() {
		_, err := d.cli.ImageRemove(cleanupCtx(t), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		if err != nil {
			t.Errorf("remove image %s: %v", ref, err)
		}
	})
}

// execIn runs script with sh in a running container as its user and
// returns its stdout and stderr together, and its exit code.
func execIn(t *testing.T, d *Driver, id, script string) (string, int) {
	t.Helper()
	ctx := t.Context()
	ex, err := d.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd: []string{"sh", "-c", script}, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		t.Fatalf("exec create: %v", err)
	}
	att, err := d.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec attach: %v", err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatalf("exec output: %v", err)
	}
	var code int
	poll(t, "exec to finish", func() bool {
		res, err := d.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatalf("exec inspect: %v", err)
		}
		code = res.ExitCode
		return !res.Running
	})
	return strings.TrimSpace(out.String()), code
}

// poll calls cond until it holds, failing the test after 30 seconds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		}
	}
}
