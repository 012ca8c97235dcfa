package ctl

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/agentd"
)

// snapDaemon starts a real agentd on a unix socket and returns its
// address and workspace.
func snapDaemon(t *testing.T) (addr, ws string) {
	t.Helper()
	dir := t.TempDir()
	ws = filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := agentd.New(t.Context(), agentd.Options{
		Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(), Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agentd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "unix://" + sock, ws
}

// snapRun runs agentctl in-process the way Main does, with the snapshot
// command added to the root command should it not be there yet.
func snapRun(t *testing.T, addr string, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{io: IO{In: stdin, Out: &out, Err: &errb}, failCode: ExitError}
	root := a.rootCmd()
	if c, _, err := root.Find([]string{"snapshot"}); err != nil || c == root {
		root.AddCommand(a.snapshotCmd())
	}
	root.SetArgs(append([]string{"--addr", addr}, args...))
	root.SetIn(stdin)
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(t.Context())
	switch {
	case err == nil:
		code = ExitOK
	default:
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		} else {
			code = ExitError
			if isUsage(err) {
				code = ExitUsage
			}
		}
		printError(&errb, err)
	}
	return code, out.String(), errb.String()
}

var snapIDPattern = regexp.MustCompile(`^s-[0-9]{8}-[0-9]{6}-[0-9a-f]{8}\n$`)

func TestSnapshotCommands(t *testing.T) {
	t.Parallel()
	addr, ws := snapDaemon(t)
	proj := filepath.Join(ws, "proj")
	os.MkdirAll(filepath.Join(proj, "src"), 0o755)
	os.WriteFile(filepath.Join(proj, "src", "main.go"), []byte("package main\n"), 0o644)
	os.WriteFile(filepath.Join(proj, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(proj, "debug.log"), []byte("noise"), 0o644)
	os.Symlink("src/main.go", filepath.Join(proj, "main"))

	run := func(stdin io.Reader, args ...string) (int, string, string) {
		t.Helper()
		if stdin == nil {
			stdin = strings.NewReader("")
		}
		return snapRun(t, addr, stdin, args...)
	}

	code, out, errOut := run(nil, "snapshot", "create", "proj", "--label", "first", "--exclude", "*.log")
	if code != 0 || !snapIDPattern.MatchString(out) {
		t.Fatalf("create: exit %d, stdout %q, stderr %q; want the id alone", code, out, errOut)
	}
	id := strings.TrimSpace(out)

	code, out, _ = run(nil, "snapshot", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "first") || !strings.Contains(out, proj) {
		t.Errorf("list: exit %d:\n%s", code, out)
	}
	code, out, _ = run(nil, "snapshot", "show", id)
	if code != 0 || !strings.Contains(out, "src/main.go") || !strings.Contains(out, "main -> src/main.go") || strings.Contains(out, "debug.log") {
		t.Errorf("show: exit %d:\n%s", code, out)
	}

	os.WriteFile(filepath.Join(proj, "src", "main.go"), []byte("package broken\n"), 0o644)
	os.Chmod(filepath.Join(proj, "run.sh"), 0o644)
	os.WriteFile(filepath.Join(proj, "new.txt"), []byte("new"), 0o644)
	code, out, _ = run(nil, "snapshot", "diff", id)
	if want := "A new.txt\nM run.sh (mode 0755 -> 0644)\nM src/main.go\n"; code != 0 || out != want {
		t.Errorf("diff: exit %d:\n%s\nwant:\n%s", code, out, want)
	}

	code, out, errOut = run(nil, "snapshot", "restore", id, "--delete-extra")
	if code != 0 || out != fmt.Sprintf("restored %s into %s: 1 file written, 2 unchanged, 1 path removed\n", id, proj) {
		t.Errorf("restore: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "src", "main.go")); string(b) != "package main\n" {
		t.Errorf("main.go holds %q after restore", b)
	}
	if _, err := os.Stat(filepath.Join(proj, "debug.log")); err != nil {
		t.Error("restore --delete-extra removed the excluded debug.log")
	}

	// export → import → restore elsewhere.
	code, archive, errOut := run(nil, "snapshot", "export", id)
	if code != 0 || snapTarNames(t, archive) != "main,run.sh,src/,src/main.go" {
		t.Fatalf("export: exit %d, stderr %q, entries %q", code, errOut, snapTarNames(t, archive))
	}
	code, out, errOut = run(strings.NewReader(archive), "snapshot", "import", "--root", "copy", "--label", "imported")
	if code != 0 || !snapIDPattern.MatchString(out) {
		t.Fatalf("import: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	imported := strings.TrimSpace(out)
	if code, _, errOut = run(nil, "snapshot", "restore", imported); code != 0 {
		t.Fatalf("restore of the import: %s", errOut)
	}
	if target, _ := os.Readlink(filepath.Join(ws, "copy", "main")); target != "src/main.go" {
		t.Errorf("restored import: link main -> %q", target)
	}
	file := filepath.Join(t.TempDir(), "x.tar")
	if code, _, errOut = run(nil, "snapshot", "export", id, "-o", file); code != 0 {
		t.Fatalf("export -o: %s", errOut)
	}
	if b, _ := os.ReadFile(file); string(b) != archive {
		t.Error("export -o wrote a different archive")
	}
	if code, out, errOut = run(nil, "snapshot", "import", file); code != 0 || !snapIDPattern.MatchString(out) {
		t.Errorf("import FILE: exit %d, %q %q", code, out, errOut)
	}

	// --json: one document.
	code, out, _ = run(nil, "--json", "snapshot", "create", "proj")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc["id"] == nil || strings.Count(out, "\n") != 1 {
		t.Errorf("create --json: exit %d, %q (%v)", code, out, err)
	}

	code, out, _ = run(nil, "snapshot", "rm", id)
	if code != 0 || !strings.HasPrefix(out, "deleted "+id+", freed ") {
		t.Errorf("rm: exit %d, %q", code, out)
	}
}

func snapTarNames(t *testing.T, archive string) string {
	t.Helper()
	tr := tar.NewReader(strings.NewReader(archive))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return strings.Join(names, ",")
		}
		if err != nil {
			return "not a tar: " + err.Error()
		}
		names = append(names, h.Name)
	}
}

func TestSnapshotCommandErrors(t *testing.T) {
	t.Parallel()
	addr, ws := snapDaemon(t)
	os.WriteFile(filepath.Join(ws, "file"), []byte("x"), 0o644)
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"snapshot", "create", "missing"}, ExitError, "does not exist"},
		{[]string{"snapshot", "create", "file"}, ExitError, "is a file, not a directory"},
		{[]string{"snapshot", "restore", "bogus"}, ExitError, "not a snapshot id"},
		{[]string{"snapshot", "diff", "s-20200101-000000-00000000"}, ExitError, "no snapshot s-20200101-000000-00000000"},
		{[]string{"snapshot", "rm", "s-20200101-000000-00000000"}, ExitError, "no snapshot"},
		{[]string{"snapshot", "import", "no-such.tar"}, ExitError, "no such file"},
		{[]string{"snapshot", "diff"}, ExitUsage, "accepts between 1 and 2 arg"},
		{[]string{"snapshot", "create", "a", "b"}, ExitUsage, "accepts at most 1 arg"},
	}
	for _, tt := range tests {
		code, out, errOut := snapRun(t, addr, strings.NewReader(""), tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.msg) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d saying %q", tt.args, code, out, errOut, tt.code, tt.msg)
		}
	}
	code, _, errOut := snapRun(t, addr, strings.NewReader("this is not a tar archive at all, sorry"), "snapshot", "import")
	if code != ExitError || !strings.Contains(errOut, "not a valid tar archive") {
		t.Errorf("import of garbage: exit %d, %q", code, errOut)
	}
}
