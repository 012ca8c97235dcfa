package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/agentd"
)

// pyRealBinary is python3's real binary: a version manager's shim (pyenv)
// costs up to a second per interpreter start on a loaded machine.
var pyRealBinary = sync.OnceValue(func() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})

// pyDaemon starts a real agentd on a unix socket and returns its address
// and workspace.
func pyDaemon(t *testing.T) (addr, workspace string) {
	t.Helper()
	py := pyRealBinary()
	if py == "" {
		t.Skip("no python3 on PATH")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(py)+string(filepath.ListSeparator)+os.Getenv("PATH"))
	srv, err := agentd.New(t.Context(), agentd.Options{
		Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: env, Logger: zaptest.NewLogger(t),
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

type pyResult struct {
	Code           int
	Stdout, Stderr string
}

// pyCtl runs agentctl in-process with stdin. It is Main with the python
// command registered, whether or not rootCmd has it yet.
func pyCtl(t *testing.T, addr, stdin string, args ...string) pyResult {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{io: IO{In: strings.NewReader(stdin), Out: &out, Err: &errb}, failCode: ExitError}
	root := a.rootCmd()
	if c, _, err := root.Find([]string{"python"}); err != nil || c == root {
		cmd := a.pythonCmd()
		cmd.GroupID = "proc"
		root.AddCommand(cmd)
	}
	root.SetArgs(append([]string{"--addr", addr}, args...))
	root.SetIn(a.io.In)
	root.SetOut(&out)
	root.SetErr(&errb)
	code := ExitOK
	if err := root.ExecuteContext(t.Context()); err != nil {
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			code = ee.code
		case isUsage(err):
			code = ExitUsage
		default:
			code = a.failCode
		}
		printError(&errb, err)
	}
	return pyResult{code, out.String(), errb.String()}
}

func TestPythonCommand(t *testing.T) {
	t.Parallel()
	addr, _ := pyDaemon(t)
	script := filepath.Join(t.TempDir(), "script.py")
	if err := os.WriteFile(script, []byte("import sys\nprint('from file', sys.argv)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const help = "Run 'agentctl --help' for usage.\n" // after a command-line mistake
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  pyResult
	}{
		{"-c with value", "", []string{"python", "-c", "print('hi')\n6*7"}, pyResult{0, "hi\n42\n", ""}},
		{"stderr apart", "", []string{"python", "-c", "import sys\nprint('o')\nprint('e', file=sys.stderr)"}, pyResult{0, "o\n", "e\n"}},
		{"file", "", []string{"python", script}, pyResult{0, "from file ['']\n", ""}},
		{"stdin", "print('piped')", []string{"python"}, pyResult{0, "piped\n", ""}},
		{"stdin dash", "1+1", []string{"python", "-"}, pyResult{0, "2\n", ""}},
		{"sys.exit(2)", "", []string{"python", "-c", "import sys; sys.exit(2)"}, pyResult{1, "", "SystemExit: 2\n"}},
		{"sys.exit(0)", "", []string{"python", "-c", "import sys; sys.exit(0)"}, pyResult{0, "", ""}},
		{"cwd and env", "", []string{"python", "--cwd", "/tmp", "-e", "GREETING=hey", "-c", "import os; os.getcwd(), os.environ['GREETING']"}, pyResult{0, "('/tmp', 'hey')\n", ""}},
		{"-c and file", "", []string{"python", "-c", "1", script}, pyResult{2, "", "agentctl: give the code either with -c or as FILE, not both\n" + help}},
		{"reset without session", "", []string{"python", "--reset"}, pyResult{2, "", "agentctl: --reset and --close need --session S\n" + help}},
		{"bad env", "", []string{"python", "-e", "NOVALUE", "-c", "1"}, pyResult{2, "", "agentctl: --env \"NOVALUE\": want KEY=VALUE (a bare NAME picks a hub environment, with --hub)\n" + help}},
		{"missing file", "", []string{"python", "/no/such/file.py"}, pyResult{2, "", "agentctl: open /no/such/file.py: no such file or directory\n" + help}},
		{"bad session", "", []string{"python", "--session", "a b", "-c", "1"}, pyResult{125, "", "agentctl: invalid session name \"a b\": use 1 to 64 characters from A-Z a-z 0-9 _ . -\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := pyCtl(t, addr, tt.stdin, tt.args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("agentctl %q (-got +want):\n%s", tt.args, diff)
			}
		})
	}

}

func TestPythonCommandException(t *testing.T) {
	t.Parallel()
	addr, _ := pyDaemon(t)
	got := pyCtl(t, addr, "", "python", "-c", "print('before')\n1/0")
	if got.Code != ExitError || got.Stdout != "before\n" || !strings.HasPrefix(got.Stderr, "Traceback (most recent call last):\n  File \"<run-1>\", line 2, in <module>\n") ||
		!strings.HasSuffix(got.Stderr, "\nZeroDivisionError: division by zero\n") {
		t.Errorf("exception: %+v", got)
	}
}

func TestPythonCommandTimeout(t *testing.T) {
	t.Parallel()
	addr, _ := pyDaemon(t)
	got := pyCtl(t, addr, "", "python", "--session", "t", "-c", "x = 1")
	if got.Code != 0 {
		t.Fatalf("first run: %+v", got)
	}
	got = pyCtl(t, addr, "", "python", "--session", "t", "--timeout", "200ms", "-c", "import time\nprint('go', flush=True)\ntime.sleep(30)")
	if got.Code != ExitTimeout || got.Stdout != "go\n" || !strings.Contains(got.Stderr, "KeyboardInterrupt") ||
		!strings.Contains(got.Stderr, "agentctl: timed out after 200ms; session t lives on") {
		t.Errorf("timed-out run: %+v", got)
	}
	got = pyCtl(t, addr, "", "python", "--session", "t", "-c", "x")
	if got.Code != 0 || got.Stdout != "1\n" {
		t.Errorf("after the timeout: %+v", got)
	}
}

func TestPythonCommandSessions(t *testing.T) {
	t.Parallel()
	addr, _ := pyDaemon(t)
	if got := pyCtl(t, addr, "", "python", "--list-sessions"); got.Code != 0 || got.Stdout != "" || got.Stderr != "no python sessions\n" {
		t.Errorf("empty list: %+v", got)
	}
	pyCtl(t, addr, "", "python", "-s", "nb", "-c", "x = 1")
	got := pyCtl(t, addr, "", "python", "--list-sessions")
	lines := strings.Split(strings.TrimSpace(got.Stdout), "\n")
	if got.Code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "SESSION") || !strings.HasPrefix(lines[1], "nb ") || !strings.Contains(lines[1], " idle ") {
		t.Errorf("list: %+v", got)
	}
	got = pyCtl(t, addr, "", "--json", "python", "--list-sessions")
	var list struct {
		Sessions []struct {
			Name string `json:"name"`
			Runs string `json:"runs"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(got.Stdout), &list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].Name != "nb" || list.Sessions[0].Runs != "1" {
		t.Errorf("--json list: %+v (%v)", got, err)
	}

	// --reset before the code, --close after it.
	got = pyCtl(t, addr, "", "python", "-s", "nb", "--reset", "--close", "-c", "'x' in globals()")
	if got.Code != 0 || got.Stdout != "False\n" {
		t.Errorf("reset, run, close: %+v", got)
	}
	if got := pyCtl(t, addr, "", "python", "-s", "nb", "--close"); got.Code != ExitFailed || !strings.Contains(got.Stderr, `no python session "nb"`) {
		t.Errorf("close again: %+v", got)
	}

	// --json: one event per line, done last.
	got = pyCtl(t, addr, "", "--json", "python", "-c", "print('a')\n1/0")
	var kinds []string
	var stdout []byte
	for line := range strings.Lines(got.Stdout) {
		var ev struct {
			Output *struct {
				Stream string `json:"stream"`
				Data   []byte `json:"data"`
			} `json:"output"`
			Error *struct {
				Name string `json:"name"`
			} `json:"error"`
			Done *struct {
				Failed bool `json:"failed"`
			} `json:"done"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		switch {
		case ev.Output != nil && ev.Output.Stream == "PYTHON_STREAM_STDOUT":
			stdout = append(stdout, ev.Output.Data...)
			if len(kinds) == 0 || kinds[len(kinds)-1] != "output" {
				kinds = append(kinds, "output")
			}
		case ev.Error != nil:
			kinds = append(kinds, "error "+ev.Error.Name)
		case ev.Done != nil:
			kinds = append(kinds, fmt.Sprintf("done failed=%v", ev.Done.Failed))
		}
	}
	if diff := cmp.Diff([]string{"output", "error ZeroDivisionError", "done failed=true"}, kinds); diff != "" || string(stdout) != "a\n" || got.Code != 1 {
		t.Errorf("--json run: %+v\nevents (-got +want):\n%s", got, diff)
	}
}

// notifyWriter closes wrote once a whole line was written to it.
type notifyWriter struct {
	bytes.Buffer
	once  sync.Once
	wrote chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if bytes.Contains(w.Bytes(), []byte("\n")) {
		w.once.Do(func() { close(w.wrote) })
	}
	return n, err
}

// TestPythonCommandInterrupt: a signal during a run cancels it (the daemon
// interrupts it) and agentctl exits 128+N: 130 for SIGINT, 143 for SIGTERM.
func TestPythonCommandInterrupt(t *testing.T) {
	t.Parallel()
	addr, _ := pyDaemon(t)
	for _, tc := range []struct {
		sig  os.Signal
		code int
	}{{os.Interrupt, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			t.Parallel()
			out := &notifyWriter{wrote: make(chan struct{})}
			var errb bytes.Buffer
			sigs := make(chan os.Signal, 1)
			done := make(chan int, 1)
			go func() {
				done <- Main(t.Context(), []string{"--addr", addr, "python", "-c", "import time\nprint('waiting', flush=True)\ntime.sleep(30)"},
					IO{In: strings.NewReader(""), Out: out, Err: &errb, Signals: sigs})
			}()
			<-out.wrote
			sigs <- tc.sig
			if code := <-done; code != tc.code || out.String() != "waiting\n" || !strings.Contains(errb.String(), "interrupted") {
				t.Errorf("after %v: exit %d, stdout %q, stderr %q; want exit %d", tc.sig, code, out.String(), errb.String(), tc.code)
			}
		})
	}
}
