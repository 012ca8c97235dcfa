//go:build unix

// These tests run a real Python interpreter through the fd 3/4 driver: unix
// only. Python sessions are refused on Windows (see sys_windows.go).

package pyrun

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/runner"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// needPython skips the test when the machine has no python3.
func needPython(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 on PATH")
	}
}

var realPython = sync.OnceValue(func() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})

// testEnv is the test's environment with the directory of python3's real
// binary first on PATH: a version manager's shim (pyenv) costs a second per
// interpreter start on a loaded machine.
func testEnv() []string {
	env := os.Environ()
	if py := realPython(); py != "" {
		env = append(env, "PATH="+filepath.Dir(py)+string(filepath.ListSeparator)+os.Getenv("PATH"))
	}
	return env
}

// newTestManager returns a Manager with test defaults (a temp workspace, a
// short interrupt grace, a test logger), shut down at the end of the test.
func newTestManager(t testing.TB, opts Options) *Manager {
	t.Helper()
	needPython(t)
	if opts.Workspace == "" {
		opts.Workspace = t.TempDir()
	}
	if opts.Env == nil {
		opts.Env = testEnv()
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	if opts.InterruptGrace == 0 {
		opts.InterruptGrace = 300 * time.Millisecond
	}
	m := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

// outcome is what a run emitted.
type outcome struct {
	Stdout, Stderr string
	Results        []string
	Errors         []Error
	Done           Done
	Events         []Event // without Output
}

// run runs spec and collects its events, checking that Done comes last and
// once, and that output chunks are within bounds.
func run(t testing.TB, m *Manager, spec RunSpec) outcome {
	t.Helper()
	o, err := tryRun(t, m, spec)
	if err != nil {
		t.Fatalf("Run(%q): %v", spec.Code, err)
	}
	return o
}

func tryRun(t testing.TB, m *Manager, spec RunSpec) (outcome, error) {
	t.Helper()
	var o outcome
	var stdout, stderr strings.Builder
	dones := 0
	err := m.Run(t.Context(), spec, func(ev Event) error {
		if dones > 0 {
			t.Errorf("event %#v after Done", ev)
		}
		switch e := ev.(type) {
		case Output:
			if len(e.Data) == 0 || len(e.Data) > chunkSize {
				t.Errorf("output chunk of %d bytes", len(e.Data))
			}
			if e.Stream == Stdout {
				stdout.Write(e.Data)
			} else {
				stderr.Write(e.Data)
			}
			return nil
		case Result:
			o.Results = append(o.Results, e.Repr)
		case Error:
			o.Errors = append(o.Errors, e)
		case Done:
			o.Done = e
			dones++
		}
		o.Events = append(o.Events, ev)
		return nil
	})
	o.Stdout, o.Stderr = stdout.String(), stderr.String()
	if err == nil && dones != 1 {
		t.Errorf("run of %q: %d Done events, want 1", spec.Code, dones)
	}
	return o, err
}

func wantKind(t testing.TB, err error, kind errs.Kind, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want kind %v %q", kind, msg)
	}
	if got := errs.KindOf(err); got != kind {
		t.Errorf("kind of %q = %v, want %v", err, got, kind)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("err = %q, want it to contain %q", err, msg)
	}
}

func TestOneOff(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	tests := []struct {
		name string
		code string
		want outcome
	}{
		{"print", "print('hi')", outcome{Stdout: "hi\n"}},
		{"trailing expression", "x = 20\nx * 2 + 2", outcome{Results: []string{"42"}}},
		{"None is not reported", "None", outcome{}},
		{"print and value in order", "print('a')\n'b'", outcome{Stdout: "a\n", Results: []string{"'b'"}}},
		{"stderr apart", "import sys\nprint('out')\nprint('err', file=sys.stderr)", outcome{Stdout: "out\n", Stderr: "err\n"}},
		{"bytes exact", "import sys\nsys.stdout.buffer.write(b'\\x00\\xff\\r\\n no newline');", outcome{Stdout: "\x00\xff\r\n no newline"}},
		{"value of a call", "import sys\nsys.stdout.write('abc')", outcome{Stdout: "abc", Results: []string{"3"}}},
		{"semicolon silences", "1 + 1;  # no value", outcome{}},
		{"subprocess output", "import subprocess\nsubprocess.run(['echo', 'from child'])", outcome{Stdout: "from child\n", Results: []string{"CompletedProcess(args=['echo', 'from child'], returncode=0)"}}},
		{"os.write", "import os\nos.write(1, b'raw')\nos.write(2, b'rawerr');", outcome{Stdout: "raw", Stderr: "rawerr"}},
		{"sys.exit(0)", "import sys\nprint('bye')\nsys.exit(0)", outcome{Stdout: "bye\n"}},
		{"top-level await", "import asyncio\nawait asyncio.sleep(0)\n7", outcome{Results: []string{"7"}}},
		{"main module", "__name__", outcome{Results: []string{"'__main__'"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := run(t, m, RunSpec{Code: tt.code})
			if got.Done.Failed || got.Done.TimedOut || got.Done.SessionAlive {
				t.Errorf("Done = %+v, want not failed, not timed out, no session", got.Done)
			}
			got.Done, got.Events = Done{}, nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("run %q (-got +want):\n%s", tt.code, diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	tests := []struct {
		name, code   string
		wantName     string
		wantValue    string
		wantTraceAll []string // substrings of the traceback
		wantStdout   string
	}{
		{"zero division", "print('before')\ndef f():\n    return 1/0\nf()", "ZeroDivisionError", "division by zero",
			[]string{"Traceback (most recent call last):", `File "<run-1>", line 4, in <module>`, "return 1/0", "ZeroDivisionError: division by zero"}, "before\n"},
		{"syntax error", "x = (", "SyntaxError", "", []string{"SyntaxError"}, ""},
		{"sys.exit(3)", "import sys\nsys.exit(3)", "SystemExit", "3", nil, ""},
		{"sys.exit message", "raise SystemExit('bad input')", "SystemExit", "bad input", nil, ""},
		{"raise in repr", "class A:\n    def __repr__(self): raise ValueError('no repr')\nA()", "ValueError", "no repr", []string{"__repr__"}, ""},
		{"null byte", "x = 1\x00", "", "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := run(t, m, RunSpec{Code: tt.code})
			if !got.Done.Failed || len(got.Errors) != 1 {
				t.Fatalf("run %q: Done %+v, errors %+v; want one error", tt.code, got.Done, got.Errors)
			}
			e := got.Errors[0]
			if tt.wantName != "" && (e.Name != tt.wantName || !strings.Contains(e.Value, tt.wantValue)) {
				t.Errorf("error = %s: %q, want %s: %q", e.Name, e.Value, tt.wantName, tt.wantValue)
			}
			for _, s := range tt.wantTraceAll {
				if !strings.Contains(e.Traceback, s) {
					t.Errorf("traceback lacks %q:\n%s", s, e.Traceback)
				}
			}
			if strings.Contains(e.Traceback, "agentd-driver") {
				t.Errorf("traceback shows the driver's frames:\n%s", e.Traceback)
			}
			if got.Stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", got.Stdout, tt.wantStdout)
			}
		})
	}
}

func TestSessionKeepsGlobals(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	run(t, m, RunSpec{Session: "nb", Code: "x = 41\ndef inc(v):\n    return v + 1"})
	got := run(t, m, RunSpec{Session: "nb", Code: "inc(x)"})
	if diff := cmp.Diff([]string{"42"}, got.Results); diff != "" || !got.Done.SessionAlive {
		t.Errorf("second run: results (-got +want):\n%s\nDone %+v", diff, got.Done)
	}
	// A traceback names the run the function came from.
	got = run(t, m, RunSpec{Session: "nb", Code: "inc(None)"})
	if len(got.Errors) != 1 || !strings.Contains(got.Errors[0].Traceback, `File "<run-1>", line 3, in inc`) {
		t.Errorf("errors = %+v, want a traceback through <run-1> line 3", got.Errors)
	}
	// Another session is apart.
	got = run(t, m, RunSpec{Session: "other", Code: "'x' in globals()"})
	if diff := cmp.Diff([]string{"False"}, got.Results); diff != "" {
		t.Errorf("other session (-got +want):\n%s", diff)
	}
	list := m.List()
	if len(list) != 2 || list[0].Name != "nb" || list[0].Runs != 3 || list[1].Name != "other" || list[0].Pid == 0 || list[0].Busy {
		t.Errorf("List = %+v, want nb (3 runs) and other", list)
	}
	if err := m.Reset(t.Context(), "nb"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	got = run(t, m, RunSpec{Session: "nb", Code: "'x' in globals()"})
	if diff := cmp.Diff([]string{"False"}, got.Results); diff != "" {
		t.Errorf("after reset (-got +want):\n%s", diff)
	}
	if err := m.Close("nb"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantKind(t, m.Close("nb"), errs.NotFound, `no python session "nb"`)
	wantKind(t, m.Reset(t.Context(), "nb"), errs.NotFound, `no python session "nb"`)
	if list := m.List(); len(list) != 1 || list[0].Name != "other" {
		t.Errorf("List after close = %+v, want only other", list)
	}
}

func TestSessionCwdAndEnv(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{Env: append(testEnv(), "AGENTD_TOKEN=secret", "BASE=1")})
	ws := m.opts.Workspace
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	code := "import os\n(os.getcwd(), os.environ.get('AGENTD_TOKEN'), os.environ.get('BASE'), os.environ.get('RUNVAR'))"
	got := run(t, m, RunSpec{Code: code, Cwd: "sub", Env: map[string]string{"RUNVAR": "v"}})
	want := []string{"('" + sub + "', None, '1', 'v')"}
	if diff := cmp.Diff(want, got.Results); diff != "" {
		t.Errorf("one-off (-got +want):\n%s", diff)
	}
	got = run(t, m, RunSpec{Session: "s", Code: code})
	if diff := cmp.Diff([]string{"('" + ws + "', None, '1', None)"}, got.Results); diff != "" {
		t.Errorf("session, first run (-got +want):\n%s", diff)
	}
	got = run(t, m, RunSpec{Session: "s", Code: code, Cwd: sub, Env: map[string]string{"RUNVAR": "w"}})
	if diff := cmp.Diff([]string{"('" + sub + "', None, '1', 'w')"}, got.Results); diff != "" {
		t.Errorf("session, second run (-got +want):\n%s", diff)
	}
	// Without cwd and env the session stays where the last run left it.
	got = run(t, m, RunSpec{Session: "s", Code: code})
	if diff := cmp.Diff([]string{"('" + sub + "', None, '1', 'w')"}, got.Results); diff != "" {
		t.Errorf("session, third run (-got +want):\n%s", diff)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	tests := []struct {
		name string
		spec RunSpec
		kind errs.Kind
		msg  string
	}{
		{"session name chars", RunSpec{Session: "a b"}, errs.Invalid, "invalid session name"},
		{"session name slash", RunSpec{Session: "../x"}, errs.Invalid, "invalid session name"},
		{"session name long", RunSpec{Session: strings.Repeat("a", 65)}, errs.Invalid, "session name of 65 characters"},
		{"huge code", RunSpec{Code: strings.Repeat("#", MaxCodeBytes+1)}, errs.Invalid, "the limit is 10 MiB"},
		{"negative timeout", RunSpec{Timeout: -time.Second}, errs.Invalid, "negative"},
		{"missing cwd", RunSpec{Cwd: "nope"}, errs.NotFound, "does not exist"},
		{"env name", RunSpec{Env: map[string]string{"A=B": "x"}}, errs.Invalid, "invalid variable name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := m.Run(t.Context(), tt.spec, func(ev Event) error {
				t.Errorf("event %#v for a bad request", ev)
				return nil
			})
			wantKind(t, err, tt.kind, tt.msg)
		})
	}
	wantKind(t, m.Close("a/b"), errs.Invalid, "invalid session name")
	// Large code is taken.
	got := run(t, m, RunSpec{Code: "#" + strings.Repeat("x", 2<<20) + "\n1"})
	if diff := cmp.Diff([]string{"1"}, got.Results); diff != "" {
		t.Errorf("code of 2 MiB (-got +want):\n%s", diff)
	}
}

func TestNoPython(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{Env: []string{"PATH=" + t.TempDir(), "HOME=/tmp"}})
	err := m.Run(t.Context(), RunSpec{Code: "1"}, func(Event) error { return nil })
	wantKind(t, err, errs.Precondition, "python3 not found on PATH")
	err = m.Run(t.Context(), RunSpec{Code: "1", Session: "s"}, func(Event) error { return nil })
	wantKind(t, err, errs.Precondition, "python3 not found on PATH")
	_, err = m.Packages(t.Context())
	wantKind(t, err, errs.Precondition, "python3 not found on PATH")

	// A "python" that is not one says so.
	dir := t.TempDir()
	fake := filepath.Join(dir, "python3")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'fake python: broken' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, Options{Env: []string{"PATH=" + dir}})
	err = m2.Run(t.Context(), RunSpec{Code: "1"}, func(Event) error { return nil })
	wantKind(t, err, errs.Unavailable, "fake python: broken")
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	run(t, m, RunSpec{Session: "s", Code: "x = 1"})
	got := run(t, m, RunSpec{Session: "s", Code: "import time\nprint('start', flush=True)\ntime.sleep(60)", Timeout: 200 * time.Millisecond})
	if !got.Done.TimedOut || !got.Done.Failed || !got.Done.SessionAlive || got.Stdout != "start\n" {
		t.Errorf("timed-out run: Done %+v, stdout %q; want timed out, failed, session alive, 'start'", got.Done, got.Stdout)
	}
	if len(got.Errors) != 1 || got.Errors[0].Name != "KeyboardInterrupt" || !strings.Contains(got.Errors[0].Traceback, "time.sleep(60)") {
		t.Errorf("errors = %+v, want a KeyboardInterrupt at time.sleep(60)", got.Errors)
	}
	got = run(t, m, RunSpec{Session: "s", Code: "x"})
	if diff := cmp.Diff([]string{"1"}, got.Results); diff != "" {
		t.Errorf("after the timeout x (-got +want):\n%s", diff)
	}

	// A run that swallows KeyboardInterrupt is killed, and its session discarded.
	code := "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
	got = run(t, m, RunSpec{Session: "s", Code: code, Timeout: 100 * time.Millisecond})
	if !got.Done.TimedOut || !got.Done.Failed || got.Done.SessionAlive {
		t.Errorf("stubborn run: Done %+v, want timed out, failed, session dead", got.Done)
	}
	if len(got.Errors) != 1 || got.Errors[0].Name != "Killed" || !strings.Contains(got.Errors[0].Value, "timeout") {
		t.Errorf("errors = %+v, want Killed after the timeout", got.Errors)
	}
	if list := m.List(); len(list) != 0 {
		t.Errorf("List = %+v, want no session", list)
	}
	got = run(t, m, RunSpec{Session: "s", Code: "'x' in globals()"})
	if diff := cmp.Diff([]string{"False"}, got.Results); diff != "" || !got.Done.SessionAlive {
		t.Errorf("fresh session (-got +want):\n%s", diff)
	}

	// The code's __repr__ of the trailing value is interruptible too.
	got = run(t, m, RunSpec{Code: "class Slow:\n    def __repr__(self):\n        while True: pass\nSlow()", Timeout: 100 * time.Millisecond})
	if !got.Done.TimedOut || len(got.Errors) != 1 || got.Errors[0].Name != "KeyboardInterrupt" || len(got.Results) != 0 {
		t.Errorf("slow repr: Done %+v, errors %+v; want a KeyboardInterrupt", got.Done, got.Errors)
	}

	// One-off runs time out too.
	got = run(t, m, RunSpec{Code: "while True: pass", Timeout: 100 * time.Millisecond})
	if !got.Done.TimedOut || len(got.Errors) != 1 || got.Errors[0].Name != "KeyboardInterrupt" {
		t.Errorf("one-off: Done %+v, errors %+v; want a KeyboardInterrupt", got.Done, got.Errors)
	}
}

func TestBusy(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var first outcome
	go func() {
		defer wg.Done()
		var once sync.Once
		err := m.Run(t.Context(), RunSpec{Session: "b", Code: "import sys, time\nprint('go', flush=True)\ntime.sleep(30)", Timeout: 20 * time.Second}, func(ev Event) error {
			if _, ok := ev.(Output); ok {
				once.Do(func() { close(started) })
			}
			if d, ok := ev.(Done); ok {
				first.Done = d
			}
			if e, ok := ev.(Error); ok {
				first.Errors = append(first.Errors, e)
			}
			return nil
		})
		if err != nil {
			t.Errorf("first run: %v", err)
		}
	}()
	<-started
	_, err := tryRun(t, m, RunSpec{Session: "b", Code: "1"})
	wantKind(t, err, errs.Precondition, "session b is busy")
	if list := m.List(); len(list) != 1 || !list[0].Busy {
		t.Errorf("List = %+v, want b busy", list)
	}
	// Closing a busy session kills its run.
	if err := m.Close("b"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if first.Done.SessionAlive || len(first.Errors) != 1 || first.Errors[0].Name != "Killed" || !strings.Contains(first.Errors[0].Value, "closed") {
		t.Errorf("killed run: Done %+v, errors %+v", first.Done, first.Errors)
	}
}

func TestInterpreterExits(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	tests := []struct {
		name, code string
		session    bool
		wantErr    string // name of the error, "" for none
		wantStdout string
		wantAlive  bool
	}{
		{"os._exit in session", "import os\nprint('bye')\nos._exit(5)", true, "InterpreterExited", "bye\n", false},
		{"os._exit(0) one-off", "import os\nprint('bye', flush=True)\nos._exit(0)", false, "", "bye\n", false},
		{"segfault", "import ctypes\nctypes.string_at(0)", true, "InterpreterExited", "", false},
		{"sys.exit in session", "import sys\nsys.exit(2)", true, "SystemExit", "", true},
		{"close stdout", "import os\nprint('a')\nos.close(1)\nprint('b')", true, "OSError", "a\n", true},
		{"close control pipes", "import os\nf = open(os.devnull)\nassert f.fileno() == 3, f.fileno()\nos.closerange(3, 1 << 16)", true, "", "", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := RunSpec{Code: tt.code}
			if tt.session {
				spec.Session = "exit" + string(rune('a'+i))
			}
			got := run(t, m, spec)
			gotErr := ""
			if len(got.Errors) > 0 {
				gotErr = got.Errors[0].Name
			}
			if tt.wantErr != "" && gotErr != tt.wantErr {
				t.Errorf("errors = %+v, want %s", got.Errors, tt.wantErr)
			}
			if tt.wantErr == "" && tt.name != "close control pipes" && gotErr != "" {
				t.Errorf("errors = %+v, want none", got.Errors)
			}
			if got.Stdout != tt.wantStdout || got.Done.SessionAlive != tt.wantAlive {
				t.Errorf("stdout %q, Done %+v; want %q, alive %v", got.Stdout, got.Done, tt.wantStdout, tt.wantAlive)
			}
			if tt.session && tt.wantAlive {
				// The session still works, with its stdout repaired.
				got = run(t, m, RunSpec{Session: spec.Session, Code: "print('again')\n1"})
				if got.Stdout != "again\n" || len(got.Results) != 1 {
					t.Errorf("next run: %+v", got)
				}
			}
		})
	}
}

func TestForkedChildrenEnd(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	// A fork that returns into the driver ends there, silently.
	got := run(t, m, RunSpec{Session: "f", Code: "import os\npid = os.fork()\nif pid == 0:\n    print('child')\nelse:\n    os.waitpid(pid, 0)\n    print('parent')"})
	if got.Stdout != "child\nparent\n" || got.Done.Failed {
		t.Errorf("fork: stdout %q, Done %+v", got.Stdout, got.Done)
	}
	// Background children die with the session.
	got = run(t, m, RunSpec{Session: "f", Code: "import subprocess\np = subprocess.Popen(['sleep', '600'])\np.pid"})
	if len(got.Results) != 1 {
		t.Fatalf("results %v", got.Results)
	}
	var pid int
	if _, err := fmt.Sscan(got.Results[0], &pid); err != nil {
		t.Fatal(err)
	}
	if err := m.Close("f"); err != nil {
		t.Fatal(err)
	}
	// SIGKILL went to the whole group when Close returned; the child dies
	// when it next runs, which on a busy machine can be a moment later.
	// Polled: a process that is not ours gives no event to wait for.
	gone := func() (bool, string) {
		if err := syscall.Kill(pid, 0); err != nil {
			return true, ""
		}
		// Dead but not yet reaped by init: a zombie.
		b, _ := os.ReadFile("/proc/" + got.Results[0] + "/stat")
		return len(b) == 0 || strings.Contains(string(b), ") Z"), string(b)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok, stat := gone()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("background child %d still running 5 s after Close: %s", pid, stat)
			break
		}
	}
}

// TestOutputBackpressure floods stdout through a slow reader: everything
// arrives, and the interpreter waits for the reader instead of the daemon
// buffering the flood.
func TestOutputBackpressure(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	progress := filepath.Join(m.opts.Workspace, "progress")
	const mb = 16
	code := fmt.Sprintf("import sys\nb = b'x' * (1 << 20)\nfor i in range(%d):\n    sys.stdout.buffer.write(b)\n    sys.stdout.buffer.flush()\n    open(%q, 'w').write(str(i + 1))", mb, progress)
	var n int64
	first := true
	err := m.Run(t.Context(), RunSpec{Code: code}, func(ev Event) error {
		o, ok := ev.(Output)
		if !ok || o.Stream != Stdout {
			return nil
		}
		if first {
			// Stall the first chunk: the interpreter cannot get more than
			// a pipe's buffer ahead of it.
			first = false
			time.Sleep(300 * time.Millisecond)
			if b, _ := os.ReadFile(progress); len(b) > 0 && string(b) != "1" {
				t.Errorf("the interpreter wrote %s MiB while the reader stalled on its first chunk", b)
			}
		}
		n += int64(len(o.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != mb<<20 {
		t.Errorf("got %d bytes of stdout, want %d", n, mb<<20)
	}
}

// TestOutputOrder checks that each stream arrives in order and that
// everything printed comes before the result and the end, buffered or not.
func TestOutputOrder(t *testing.T) {
	t.Parallel()
	code := "import sys, subprocess\nfor i in range(100):\n    print(f'out {i}')\n    print(f'err {i}', file=sys.stderr)\n" +
		"sys.stdout.write('partial')\nsubprocess.run(['echo', 'child'])\n'end'"
	var wantOut, wantErr strings.Builder
	for i := range 100 {
		fmt.Fprintf(&wantOut, "out %d\n", i)
		fmt.Fprintf(&wantErr, "err %d\n", i)
	}
	for _, unbuffered := range []bool{false, true} {
		env := slices.DeleteFunc(testEnv(), func(kv string) bool { return strings.HasPrefix(kv, "PYTHONUNBUFFERED=") })
		if unbuffered {
			env = append(env, "PYTHONUNBUFFERED=1")
		}
		m := newTestManager(t, Options{Env: env})
		for _, session := range []string{"", "s"} {
			got := run(t, m, RunSpec{Code: code, Session: session})
			// The child writes to fd 1 directly, while 'partial' (no newline)
			// waits in sys.stdout's buffer unless it is unbuffered: as in a terminal.
			tail := "child\npartial"
			if unbuffered {
				tail = "partialchild\n"
			}
			if got.Stdout != wantOut.String()+tail || got.Stderr != wantErr.String() {
				t.Errorf("unbuffered %v, session %q: stdout %q, stderr %q", unbuffered, session, got.Stdout, got.Stderr)
			}
			if len(got.Events) != 2 || got.Events[0] != (Result{Repr: "'end'"}) {
				t.Errorf("unbuffered %v, session %q: events %v, want the result then done", unbuffered, session, got.Events)
			}
		}
	}
}

func TestIdleExpiry(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{IdleTimeout: 200 * time.Millisecond})
	run(t, m, RunSpec{Session: "idle", Code: "x = 1"})
	if len(m.List()) != 1 {
		t.Fatalf("List = %+v, want the session", m.List())
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(m.List()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("session still listed after 5s with a 200ms idle timeout: %+v", m.List())
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := run(t, m, RunSpec{Session: "idle", Code: "'x' in globals()"})
	if diff := cmp.Diff([]string{"False"}, got.Results); diff != "" {
		t.Errorf("after expiry (-got +want):\n%s", diff)
	}
}

func TestPackages(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	pkgs, err := m.Packages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if p.Name == "" {
			t.Errorf("package without a name: %+v", p)
		}
	}
	t.Logf("%d packages", len(pkgs))
}

func TestSessionNames(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"nb": true, "a.b-c_D9": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a b": false, "a/b": false, "é": false, "a\x00": false,
	} {
		if got := ValidSessionName(name); got != want {
			t.Errorf("ValidSessionName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCleanEnv(t *testing.T) {
	t.Parallel()
	got := runner.CleanEnv([]string{"A=1", "AGENTD_TOKEN=x", "noequals", "=v", "B=2", "A=3", "AGENTD_CONFIG_DIR=/c", "C=a\x00b"})
	if diff := cmp.Diff([]string{"A=3", "B=2"}, got); diff != "" {
		t.Errorf("cleanEnv (-got +want):\n%s", diff)
	}
	got = runner.MergeEnv([]string{"A=1", "B=2"}, map[string]string{"B": "3", "Z": "4", "C": "5"})
	if diff := cmp.Diff([]string{"A=1", "B=3", "C=5", "Z=4"}, got); diff != "" {
		t.Errorf("mergeEnv (-got +want):\n%s", diff)
	}
}

func TestLookPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "python3")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	if got, err := lookPath("python3", []string{"PATH=" + empty + ":" + dir}); err != nil || got != exe {
		t.Errorf("lookPath = %q, %v; want %q", got, err, exe)
	}
	_, err := lookPath("python3", []string{"PATH=" + empty})
	wantKind(t, err, errs.Precondition, "python3 not found on PATH")
	_, err = lookPath("notexec", []string{"PATH=" + dir})
	wantKind(t, err, errs.Precondition, "notexec not found on PATH")
	// Without PATH the search uses the shell's default path, as a command would.
	if got, err := lookPath(exe, nil); err != nil || got != exe {
		t.Errorf("lookPath(path) = %q, %v", got, err)
	}
	_, err = lookPath(filepath.Join(dir, "notexec"), nil)
	wantKind(t, err, errs.Precondition, "not found or not executable")
}

func TestFrames(t *testing.T) {
	t.Parallel()
	frame := appendFrame(nil, []byte(`{"ev":"result","repr":"42"}`))
	frame = appendFrame(frame, []byte(`{"ev":"done","failed":true}`))
	r := bytes.NewReader(frame)
	m, err := readReply(r)
	if err != nil || m.Ev != "result" || m.Repr != "42" {
		t.Errorf("first frame = %+v, %v", m, err)
	}
	m, err = readReply(r)
	if err != nil || m.Ev != "done" || !m.Failed {
		t.Errorf("second frame = %+v, %v", m, err)
	}
	if _, err := readReply(r); err != io.EOF {
		t.Errorf("at the end: %v, want EOF", err)
	}
	for name, b := range map[string][]byte{
		"truncated": appendFrame(nil, []byte(`{"ev":"x"}`))[:8],
		"too large": {0xff, 0xff, 0xff, 0xff},
		"not json":  appendFrame(nil, []byte("{nope")),
	} {
		if _, err := readReply(bytes.NewReader(b)); err == nil || err == io.EOF {
			t.Errorf("%s: err = %v, want an error", name, err)
		}
	}
}
