package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/ctl"
)

// daemon is a real agentd serving on a unix socket for the test.
type daemon struct {
	addr      string
	workspace string
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
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
	return &daemon{addr: "unix://" + sock, workspace: ws}
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs agentctl in-process against d with stdin.
func (d *daemon) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := ctl.Main(t.Context(), append([]string{"--addr", d.addr}, args...), ctl.IO{
		In: strings.NewReader(stdin), Out: &out, Err: &errb,
	})
	return result{code, out.String(), errb.String()}
}

func TestExecExitCodes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	tests := []struct {
		name string
		args []string
		want result
	}{
		{"ok", []string{"exec", "--", "echo", "hi"}, result{0, "hi\n", ""}},
		{"stderr apart", []string{"exec", "--", "sh", "-c", "echo out; echo err >&2; exit 3"}, result{3, "out\n", "err\n"}},
		{"sh string", []string{"sh", "echo $((6*7)) | tr 4 X"}, result{0, "X2\n", ""}},
		{"killed by signal", []string{"sh", "kill -9 $$"}, result{137, "", ""}},
		{"timeout", []string{"sh", "--timeout", "300ms", "--grace", "100ms", "sleep 30"}, result{124, "", ""}},
		{"stdin", []string{"exec", "-i", "--", "tr", "a-z", "A-Z"}, result{0, "HELLO\n", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdin := ""
			if tt.name == "stdin" {
				stdin = "hello\n"
			}
			got := d.run(t, stdin, tt.args...)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("agentctl %v (-got +want):\n%s", tt.args, diff)
			}
		})
	}
}

func TestExecAgentctlFailureIs125(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, args := range [][]string{
		{"exec", "--", "no-such-command-agentd-test"},
		{"exec", "--cwd", "/nonexistent/dir", "--", "true"},
		{"exec", "--bogus-flag", "--", "true"},
		{"exec", "--env", "NOEQUALS", "--", "true"},
	} {
		got := d.run(t, "", args...)
		if got.code != ctl.ExitFailed || got.stderr == "" {
			t.Errorf("agentctl %v = %d, stderr %q; want 125 with a message", args, got.code, got.stderr)
		}
	}
	var out, errb bytes.Buffer
	code := ctl.Main(t.Context(), []string{"--addr", "unix:///nonexistent/agentd.sock", "exec", "--", "true"}, ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != ctl.ExitFailed || !strings.Contains(errb.String(), "no agentd socket") {
		t.Errorf("exec against missing socket = %d, %q; want 125 naming the socket", code, errb.String())
	}
}

func TestFileCommands(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if r := d.run(t, "one\ntwo\nthree\n", "write", "-p", "dir/a.txt"); r.code != 0 {
		t.Fatalf("write: %+v", r)
	}
	if r := d.run(t, "", "read", "dir/a.txt"); r.stdout != "one\ntwo\nthree\n" {
		t.Errorf("read = %+v", r)
	}
	if r := d.run(t, "", "lines", "dir/a.txt", "--from", "2", "--count", "1"); r.stdout != "two\n" || r.code != 0 {
		t.Errorf("lines = %+v", r)
	}
	r := d.run(t, "", "edit", "dir/a.txt", "--old", "two", "--new", "TWO")
	if r.code != 0 || !strings.Contains(r.stdout, "-two") || !strings.Contains(r.stdout, "+TWO") {
		t.Errorf("edit = %+v, want a diff", r)
	}
	if r := d.run(t, "", "edit", "dir/a.txt", "--old", "missing", "--new", "x"); r.code != 1 || r.stderr == "" {
		t.Errorf("edit of a missing string = %+v, want exit 1 with a message", r)
	}
	if r := d.run(t, "", "grep", "TWO"); r.code != 0 || !strings.Contains(r.stdout, "a.txt:2:TWO") {
		t.Errorf("grep = %+v", r)
	}
	if r := d.run(t, "", "grep", "nothing-matches-this"); r.code != 1 || r.stdout != "" {
		t.Errorf("grep without match = %+v, want exit 1", r)
	}
	if r := d.run(t, "", "grep", "(unclosed"); r.code != 2 {
		t.Errorf("grep with a bad regexp = %+v, want exit 2", r)
	}
	if r := d.run(t, "", "glob", "**/*.txt"); strings.TrimSpace(r.stdout) != filepath.Join(d.workspace, "dir/a.txt") {
		t.Errorf("glob = %+v", r)
	}
	if r := d.run(t, "", "mv", "dir/a.txt", "dir/b.txt"); r.code != 0 {
		t.Errorf("mv = %+v", r)
	}
	if r := d.run(t, "", "mkdir", "-p", "x/y/z"); r.code != 0 {
		t.Errorf("mkdir = %+v", r)
	}
	if r := d.run(t, "", "ls", "-R"); r.code != 0 || !strings.Contains(r.stdout, "b.txt") || !strings.Contains(r.stdout, "z/") {
		t.Errorf("ls -R = %+v", r)
	}
	if r := d.run(t, "", "rm", "x"); r.code != 1 {
		t.Errorf("rm of a non-empty dir without -r = %+v, want exit 1", r)
	}
	if r := d.run(t, "", "rm", "-r", "x"); r.code != 0 {
		t.Errorf("rm -r = %+v", r)
	}
	if r := d.run(t, "", "stat", "x"); r.code != 1 || r.stderr == "" {
		t.Errorf("stat of a removed dir = %+v, want exit 1", r)
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.run(t, "", "--json", "info")
	var info map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info["workspace"] != d.workspace {
		t.Fatalf("--json info = %+v (%v)", r, err)
	}
	r = d.run(t, "", "--json", "exec", "--", "sh", "-c", "echo hi; exit 2")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 2 || len(lines) < 3 {
		t.Fatalf("--json exec = %+v, want started, output, exited lines and exit 2", r)
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("line %q is not JSON", l)
		}
	}
}

func TestDetachPsAttach(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.run(t, "", "exec", "-d", "--tag", "bg", "--", "sh", "-c", "echo first; echo second >&2; exit 7")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "p-") || strings.Contains(id, "\n") {
		t.Fatalf("exec -d = %+v, want the id alone", r)
	}
	a := d.run(t, "", "attach", id)
	if a.code != 7 || a.stdout != "first\n" || a.stderr != "second\n" {
		t.Errorf("attach = %+v, want the whole output and exit 7", a)
	}
	ps := d.run(t, "", "ps")
	if !strings.HasPrefix(ps.stdout, id) || !strings.Contains(ps.stdout, "exited 7") {
		t.Errorf("ps = %q, want %s first with state 'exited 7'", ps.stdout, id)
	}
	if r := d.run(t, "", "attach", "p-doesnotexist"); r.code != ctl.ExitFailed {
		t.Errorf("attach unknown = %+v, want 125", r)
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := strings.TrimSpace(d.run(t, "", "exec", "-d", "--", "sleep", "60").stdout)
	if r := d.run(t, "", "kill", id, "--signal", "KILL"); r.code != 0 {
		t.Fatalf("kill = %+v", r)
	}
	if r := d.run(t, "", "attach", id); r.code != 137 {
		t.Errorf("attach after kill = %+v, want 137", r)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.run(t, "", "validate")
	if r.code != 0 {
		t.Fatalf("validate against a local agentd = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, check := range []string{"write", "read", "edit", "search", "glob", "shell", "exit codes", "stderr", "timeout", "python", "python session", "snapshot"} {
		if !strings.Contains(r.stdout, "PASS  "+check) {
			t.Errorf("validate output lacks a PASS line for %q:\n%s", check, r.stdout)
		}
	}
	r = d.run(t, "", "--json", "validate")
	var doc struct {
		Passed bool `json:"passed"`
		Checks []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || !doc.Passed || len(doc.Checks) < 12 {
		t.Errorf("--json validate = %q (%v)", r.stdout, err)
	}
}

// TestValidateSandboxChecks runs validate against a daemon in sandbox mode
// outside a container: the container checks must run and fail, each saying
// how to fix it, and validate must exit non-zero.
func TestValidateSandboxChecks(t *testing.T) {
	t.Parallel()
	if os.Getuid() == 1000 {
		t.Skip("runs as uid 1000: the uid check would pass")
	}
	dir := t.TempDir()
	srv, err := agentd.New(t.Context(), agentd.Options{Mode: agentd.ModeSandbox, Workspace: dir, StateDir: filepath.Join(dir, ".state"), Env: os.Environ(), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() { cancel(); <-done })
	d := &daemon{addr: "unix://" + sock, workspace: dir}
	r := d.run(t, "", "validate")
	if r.code == 0 {
		t.Fatalf("validate in sandbox mode outside a container passed:\n%s", r.stdout)
	}
	for _, want := range []string{"FAIL  sandbox uid", "USER 1000", "PASS  writable workspace", "PASS  writable /tmp"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate output lacks %q:\n%s", want, r.stdout)
		}
	}
	if os.Getuid() != 0 && !strings.Contains(r.stdout, "FAIL  read-only root") {
		t.Errorf("a writable / was not reported:\n%s", r.stdout)
	}
}

func TestActivityDirect(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.run(t, "", "sh", "echo recorded")
	r := d.run(t, "", "activity")
	if r.code != 0 || !strings.Contains(r.stdout, "echo recorded") || !strings.Contains(r.stdout, "exit 0") {
		t.Errorf("activity against the daemon = %+v, want the command and its exit", r)
	}
	d.run(t, "", "sh", "echo second")
	// The exit record lands a moment after the command's answer: wait
	// for it before asking for the newest two.
	for end := time.Now().Add(10 * time.Second); strings.Count(d.run(t, "", "activity").stdout, "echo second") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the second command's exit record was not stored within 10s")
		}
	}
	// --tail N: only the newest N records (each command makes a start and
	// an exit record).
	r = d.run(t, "", "activity", "--tail", "2")
	if r.code != 0 || strings.Contains(r.stdout, "echo recorded") || strings.Count(r.stdout, "echo second") != 2 {
		t.Errorf("activity --tail 2 = %+v, want the second command's two records only", r)
	}
	if r = d.run(t, "", "activity", "--tail", "0"); r.code != 0 || r.stdout != "" {
		t.Errorf("activity --tail 0 = %+v, want nothing", r)
	}
}

func TestExecWithoutCommandAndJSONZeroValues(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, args := range [][]string{{"exec"}, {"exec", "--"}, {"sh"}} {
		if r := d.run(t, "", args...); r.code != ctl.ExitFailed || r.stderr == "" {
			t.Errorf("agentctl %v = %+v, want 125 with a message", args, r)
		}
	}
	r := d.run(t, "", "--json", "exec", "--", "true")
	if !strings.Contains(r.stdout, `"exit_code":0`) {
		t.Errorf("--json exec of true lacks exit_code 0: %s", r.stdout)
	}
}
