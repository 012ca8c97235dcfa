package agentd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
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

// pyEnv is the test's environment with python3's real binary first on PATH.
func pyEnv(tb testing.TB) []string {
	tb.Helper()
	py := pyRealBinary()
	if py == "" {
		tb.Skip("no python3 on PATH")
	}
	return append(os.Environ(), "PATH="+filepath.Dir(py)+string(filepath.ListSeparator)+os.Getenv("PATH"))
}

// pyClient starts a daemon for the test and returns a PythonService client.
func pyClient(t *testing.T, opts Options) agentdv1.PythonServiceClient {
	t.Helper()
	if opts.Env == nil {
		opts.Env = pyEnv(t)
	}
	return agentdv1.NewPythonServiceClient(newTestServer(t, opts).Conn)
}

// pyRun is what a Run stream delivered.
type pyRun struct {
	stdout, stderr string
	results        []string
	errors         []*agentdv1.PythonError
	done           *agentdv1.PythonDone
	kinds          []string // event kinds in order, runs of one output stream collapsed
}

func (r *pyRun) String() string {
	return fmt.Sprintf("stdout %q, stderr %q, results %q, errors %v, done %v, events %v", r.stdout, r.stderr, r.results, r.errors, r.done, r.kinds)
}

// pyDo runs req and reads its stream to the end, checking that done comes
// last.
func pyDo(t *testing.T, c agentdv1.PythonServiceClient, req *agentdv1.RunRequest) *pyRun {
	t.Helper()
	r, err := pyTry(t.Context(), c, req)
	if err != nil {
		t.Fatalf("Run(%q): %v", req.GetCode(), err)
	}
	return r
}

func pyTry(ctx context.Context, c agentdv1.PythonServiceClient, req *agentdv1.RunRequest) (*pyRun, error) {
	st, err := c.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	r := &pyRun{}
	var stdout, stderr strings.Builder
	defer func() { r.stdout, r.stderr = stdout.String(), stderr.String() }()
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			if r.done == nil {
				return r, errors.New("stream ended without done")
			}
			return r, nil
		}
		if err != nil {
			return r, err
		}
		if r.done != nil {
			return r, fmt.Errorf("event %v after done", m)
		}
		kind := ""
		switch {
		case m.GetOutput() != nil:
			o := m.GetOutput()
			if len(o.GetData()) > 32<<10 {
				return r, fmt.Errorf("output chunk of %d bytes", len(o.GetData()))
			}
			kind = "stdout"
			if o.GetStream() == agentdv1.PythonStream_PYTHON_STREAM_STDERR {
				kind = "stderr"
				stderr.Write(o.GetData())
			} else {
				stdout.Write(o.GetData())
			}
		case m.GetResult() != nil:
			kind = "result"
			r.results = append(r.results, m.GetResult().GetRepr())
		case m.GetError() != nil:
			kind = "error"
			r.errors = append(r.errors, m.GetError())
		case m.GetDone() != nil:
			kind = "done"
			r.done = m.GetDone()
		}
		if len(r.kinds) == 0 || r.kinds[len(r.kinds)-1] != kind || (kind != "stdout" && kind != "stderr") {
			r.kinds = append(r.kinds, kind)
		}
	}
}

func pyWantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("err = %v, want %v containing %q", err, code, msg)
	}
}

func TestPythonOneOff(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	tests := []struct {
		name   string
		code   string
		stdout string
		stderr string
		result []string
		kinds  []string
	}{
		{"print and value", "print('hello')\n6 * 7", "hello\n", "", []string{"42"}, []string{"stdout", "result", "done"}},
		{"None is not shown", "x = None\nx", "", "", nil, []string{"done"}},
		{"bytes exact", "import sys\nsys.stdout.buffer.write(b'a\\x00\\xfe\\r\\nb');", "a\x00\xfe\r\nb", "", nil, []string{"stdout", "done"}},
		{"stderr apart", "import sys\nsys.stderr.write('warn\\n');", "", "warn\n", nil, []string{"stderr", "done"}},
		{"long repr cut", "'x' * 100000", "", "", nil, []string{"result", "done"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := pyDo(t, c, &agentdv1.RunRequest{Code: tt.code})
			if r.stdout != tt.stdout || r.stderr != tt.stderr || !slices.Equal(r.kinds, tt.kinds) {
				t.Errorf("got %v; want stdout %q, stderr %q, events %v", r, tt.stdout, tt.stderr, tt.kinds)
			}
			if tt.result != nil && !slices.Equal(r.results, tt.result) {
				t.Errorf("results = %q, want %q", r.results, tt.result)
			}
			if d := r.done; d.GetFailed() || d.GetTimedOut() || d.GetSessionAlive() || d.GetDuration().AsDuration() <= 0 {
				t.Errorf("done = %v, want a duration, not failed, not timed out, no session", d)
			}
			if tt.name == "long repr cut" {
				if n := len(r.results[0]); n < 64<<10 || n > 65<<10 || !strings.Contains(r.results[0], "more characters]") {
					t.Errorf("repr of %d characters, want about 64 KiB with a marker", n)
				}
			}
		})
	}
}

func TestPythonOutputOrder(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	code := "import sys\nfor i in range(300):\n    print(f'out {i}')\n    print(f'err {i}', file=sys.stderr)\n'end'"
	var wantOut, wantErr strings.Builder
	for i := range 300 {
		fmt.Fprintf(&wantOut, "out %d\n", i)
		fmt.Fprintf(&wantErr, "err %d\n", i)
	}
	for _, session := range []string{"", "order"} {
		for range 3 {
			r := pyDo(t, c, &agentdv1.RunRequest{Code: code, Session: session})
			if r.stdout != wantOut.String() || r.stderr != wantErr.String() {
				t.Fatalf("session %q: streams differ from what was printed: %v", session, r)
			}
			// Everything printed arrives before the result, and the result before done.
			if k := r.kinds; len(k) < 3 || k[len(k)-2] != "result" || k[len(k)-1] != "done" || slices.Contains(k[:len(k)-2], "result") {
				t.Fatalf("session %q: events %v, want output, then result, then done", session, k)
			}
		}
	}
}

func TestPythonErrors(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	r := pyDo(t, c, &agentdv1.RunRequest{Code: "print('before')\ndef f(d):\n    return d['missing']\nf({})"})
	if len(r.errors) != 1 || !r.done.GetFailed() {
		t.Fatalf("got %v, want one error and failed", r)
	}
	e := r.errors[0]
	if e.GetName() != "KeyError" || e.GetValue() != "'missing'" {
		t.Errorf("error = %s %q, want KeyError 'missing'", e.GetName(), e.GetValue())
	}
	for _, s := range []string{"Traceback (most recent call last):", `File "<run-1>", line 4, in <module>`, `line 3, in f`, "KeyError: 'missing'"} {
		if !strings.Contains(e.GetTraceback(), s) {
			t.Errorf("traceback lacks %q:\n%s", s, e.GetTraceback())
		}
	}
	if strings.Contains(e.GetTraceback(), "agentd-driver") || r.stdout != "before\n" {
		t.Errorf("traceback with driver frames, or stdout %q:\n%s", r.stdout, e.GetTraceback())
	}

	// sys.exit(n) is an error; the session lives on.
	r = pyDo(t, c, &agentdv1.RunRequest{Code: "import sys\nx = 1\nsys.exit(4)", Session: "exits"})
	if len(r.errors) != 1 || r.errors[0].GetName() != "SystemExit" || r.errors[0].GetValue() != "4" || !r.done.GetSessionAlive() {
		t.Errorf("sys.exit(4): %v", r)
	}
	// os.close(1): the print after it fails, the session survives with stdout repaired.
	r = pyDo(t, c, &agentdv1.RunRequest{Code: "import os\nprint('a')\nos.close(1)\nprint('b')", Session: "exits"})
	if r.stdout != "a\n" || len(r.errors) != 1 || r.errors[0].GetName() != "OSError" || !r.done.GetSessionAlive() {
		t.Errorf("os.close(1): %v", r)
	}
	r = pyDo(t, c, &agentdv1.RunRequest{Code: "print('c')\nx", Session: "exits"})
	if r.stdout != "c\n" || !slices.Equal(r.results, []string{"1"}) {
		t.Errorf("after os.close(1): %v", r)
	}
	// os._exit ends the interpreter: reported, and the session is gone.
	r = pyDo(t, c, &agentdv1.RunRequest{Code: "import os\nprint('last words')\nos._exit(9)", Session: "exits"})
	if r.stdout != "last words\n" || len(r.errors) != 1 || r.errors[0].GetName() != "InterpreterExited" ||
		!strings.Contains(r.errors[0].GetValue(), "status 9") || r.done.GetSessionAlive() {
		t.Errorf("os._exit(9): %v", r)
	}
	ls, err := c.ListSessions(t.Context(), &agentdv1.ListSessionsRequest{})
	if err != nil || len(ls.GetSessions()) != 0 {
		t.Errorf("ListSessions = %v, %v; want none", ls, err)
	}
}

func TestPythonSession(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	pyDo(t, c, &agentdv1.RunRequest{Code: "import os\ncounter = 10", Session: "nb"})
	r := pyDo(t, c, &agentdv1.RunRequest{Code: "counter += 1\ncounter", Session: "nb"})
	if !slices.Equal(r.results, []string{"11"}) || !r.done.GetSessionAlive() {
		t.Errorf("second run: %v", r)
	}
	ls, err := c.ListSessions(t.Context(), &agentdv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.GetSessions()) != 1 {
		t.Fatalf("ListSessions = %v, want nb", ls)
	}
	s := ls.GetSessions()[0]
	if s.GetName() != "nb" || s.GetRuns() != 2 || s.GetPid() <= 0 || s.GetBusy() || s.GetLastUsed().AsTime().Before(s.GetCreated().AsTime()) {
		t.Errorf("session = %v", s)
	}

	if _, err := c.ResetSession(t.Context(), &agentdv1.ResetSessionRequest{Session: "nb"}); err != nil {
		t.Fatal(err)
	}
	r = pyDo(t, c, &agentdv1.RunRequest{Code: "'counter' in globals()", Session: "nb"})
	if !slices.Equal(r.results, []string{"False"}) {
		t.Errorf("after reset: %v", r)
	}
	if _, err := c.CloseSession(t.Context(), &agentdv1.CloseSessionRequest{Session: "nb"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CloseSession(t.Context(), &agentdv1.CloseSessionRequest{Session: "nb"})
	pyWantCode(t, err, codes.NotFound, `no python session "nb"`)
	_, err = c.ResetSession(t.Context(), &agentdv1.ResetSessionRequest{Session: "nope"})
	pyWantCode(t, err, codes.NotFound, `no python session "nope"`)
}

func TestPythonTimeout(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	pyDo(t, c, &agentdv1.RunRequest{Code: "x = 'kept'", Session: "t"})
	r := pyDo(t, c, &agentdv1.RunRequest{Code: "import time\nprint('working', flush=True)\ntime.sleep(60)", Session: "t", Timeout: durationpb.New(300 * time.Millisecond)})
	if !r.done.GetTimedOut() || !r.done.GetSessionAlive() || r.stdout != "working\n" || len(r.errors) != 1 || r.errors[0].GetName() != "KeyboardInterrupt" {
		t.Fatalf("timed-out run: %v", r)
	}
	r = pyDo(t, c, &agentdv1.RunRequest{Code: "x", Session: "t"})
	if !slices.Equal(r.results, []string{"'kept'"}) {
		t.Errorf("x after the timeout: %v", r)
	}

	// A loop that swallows KeyboardInterrupt is killed after the grace
	// period, and the session is discarded.
	start := time.Now()
	r = pyDo(t, c, &agentdv1.RunRequest{
		Code:    "import time\nwhile True:\n    try:\n        time.sleep(5)\n    except KeyboardInterrupt:\n        print('ignored', flush=True)",
		Session: "t", Timeout: durationpb.New(200 * time.Millisecond),
	})
	if !r.done.GetTimedOut() || r.done.GetSessionAlive() || !r.done.GetFailed() || r.stdout != "ignored\n" ||
		len(r.errors) != 1 || r.errors[0].GetName() != "Killed" {
		t.Fatalf("stubborn run: %v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stubborn run took %s", d)
	}
	r = pyDo(t, c, &agentdv1.RunRequest{Code: "'x' in globals()", Session: "t"})
	if !slices.Equal(r.results, []string{"False"}) || !r.done.GetSessionAlive() {
		t.Errorf("next run in a fresh interpreter: %v", r)
	}
}

func TestPythonBusyAndCancel(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := c.Run(ctx, &agentdv1.RunRequest{Code: "import time\nx = 1\nprint('started', flush=True)\ntime.sleep(60)", Session: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	// The line may arrive in more than one chunk (two writes to the pipe).
	var got string
	for got != "started\n" {
		m, err := st.Recv()
		if err != nil || m.GetOutput() == nil || len(got) > len("started\n") {
			t.Fatalf("events so far %q, then %v, %v; want the output 'started'", got, m, err)
		}
		got += string(m.GetOutput().GetData())
	}
	_, err = pyTry(t.Context(), c, &agentdv1.RunRequest{Code: "1", Session: "busy"})
	pyWantCode(t, err, codes.FailedPrecondition, "session busy is busy")

	// The caller goes away: the run is interrupted, the session survives.
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := pyTry(t.Context(), c, &agentdv1.RunRequest{Code: "x", Session: "busy"})
		if err == nil {
			if !slices.Equal(r.results, []string{"1"}) {
				t.Errorf("after the cancelled run: %v", r)
			}
			break
		}
		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
			t.Fatalf("run after cancel: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the interrupted run is winding down
	}
}

func TestPythonBadInput(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	tests := []struct {
		name string
		req  *agentdv1.RunRequest
		code codes.Code
		msg  string
	}{
		{"session name", &agentdv1.RunRequest{Code: "1", Session: "no spaces"}, codes.InvalidArgument, "invalid session name"},
		{"session name length", &agentdv1.RunRequest{Code: "1", Session: strings.Repeat("s", 65)}, codes.InvalidArgument, "session name of 65 characters"},
		{"negative timeout", &agentdv1.RunRequest{Code: "1", Timeout: durationpb.New(-time.Second)}, codes.InvalidArgument, "negative"},
		{"missing cwd", &agentdv1.RunRequest{Code: "1", Cwd: "no/such/dir"}, codes.NotFound, "does not exist"},
		{"bad env", &agentdv1.RunRequest{Code: "1", Env: map[string]string{"": "x"}}, codes.InvalidArgument, "invalid variable name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := pyTry(t.Context(), c, tt.req)
			pyWantCode(t, err, tt.code, tt.msg)
		})
	}
	_, err := c.CloseSession(t.Context(), &agentdv1.CloseSessionRequest{Session: "../etc"})
	pyWantCode(t, err, codes.InvalidArgument, "invalid session name")

	// Code over 10 MiB: pyrun's cap says INVALID_ARGUMENT, unless the
	// server's gRPC receive limit (4 MiB by default) refuses it first.
	_, err = pyTry(t.Context(), c, &agentdv1.RunRequest{Code: strings.Repeat("#", 10<<20+1)})
	if !(status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "limit is 10 MiB")) &&
		!(status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")) {
		t.Errorf("huge code: %v, want INVALID_ARGUMENT (or gRPC's RESOURCE_EXHAUSTED)", err)
	}
}

func TestPythonNotFound(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{Env: []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir()}})
	for _, session := range []string{"", "s"} {
		_, err := pyTry(t.Context(), c, &agentdv1.RunRequest{Code: "1", Session: session})
		pyWantCode(t, err, codes.FailedPrecondition, "python3 not found on PATH")
	}
}

func TestPythonEnvAndSecrets(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := pyClient(t, Options{Workspace: ws, Env: append(pyEnv(t), "AGENTD_TOKEN=secret", "AGENTD_STATE_DIR=/x", "VISIBLE=yes")})
	code := "import os\nsorted(k for k in os.environ if k.startswith('AGENTD_')), os.environ['VISIBLE'], os.environ.get('MINE'), os.getcwd()"
	r := pyDo(t, c, &agentdv1.RunRequest{Code: code, Cwd: "sub", Env: map[string]string{"MINE": "1"}})
	want := fmt.Sprintf("([], 'yes', '1', '%s')", filepath.Join(ws, "sub"))
	if !slices.Equal(r.results, []string{want}) {
		t.Errorf("got %v, want %s", r, want)
	}
}

func TestPythonHugeOutput(t *testing.T) {
	t.Parallel()
	c := pyClient(t, Options{})
	const size = 50 << 20
	st, err := c.Run(t.Context(), &agentdv1.RunRequest{Code: "import sys\nb = b'0123456789abcdef' * 65536\nfor _ in range(50):\n    sys.stdout.buffer.write(b)\nprint('end', file=sys.stderr)", Session: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	var done *agentdv1.PythonDone
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if o := m.GetOutput(); o.GetStream() == agentdv1.PythonStream_PYTHON_STREAM_STDOUT {
			if len(o.GetData()) > 32<<10 {
				t.Fatalf("chunk of %d bytes", len(o.GetData()))
			}
			n += int64(len(o.GetData()))
		}
		if d := m.GetDone(); d != nil {
			done = d
		}
	}
	if n != size || done == nil || done.GetFailed() {
		t.Errorf("got %d bytes and done %v, want %d bytes and success", n, done, size)
	}
}

// pyBenchClient starts a daemon for a benchmark: python3's real binary on
// PATH, a no-op logger.
func pyBenchClient(b *testing.B) agentdv1.PythonServiceClient {
	b.Helper()
	dir := b.TempDir()
	opts := Options{Workspace: dir, StateDir: filepath.Join(dir, "state"), Env: pyEnv(b), Logger: zap.NewNop()}
	srv, err := New(b.Context(), opts)
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "agentd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			b.Errorf("Serve: %v", err)
		}
	})
	return agentdv1.NewPythonServiceClient(conn)
}

func pyBench(b *testing.B, req *agentdv1.RunRequest) {
	c := pyBenchClient(b)
	run := func() time.Duration {
		start := time.Now()
		st, err := c.Run(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		var result string
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if r := m.GetResult(); r != nil {
				result = r.GetRepr()
			}
		}
		if result != "2" {
			b.Fatalf("result %q, want 2", result)
		}
		return time.Since(start)
	}
	run() // warm: the connection, and the session's interpreter
	var ds []time.Duration
	for b.Loop() {
		ds = append(ds, run())
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100])/float64(time.Millisecond), "p99-ms")
}

// BenchmarkPythonOneOff is the round trip of `1+1` in a fresh interpreter
// (start, run, stop) over the daemon's unix socket.
func BenchmarkPythonOneOff(b *testing.B) {
	pyBench(b, &agentdv1.RunRequest{Code: "1+1"})
}

// BenchmarkPythonSession is the round trip of `1+1` in a warm session.
func BenchmarkPythonSession(b *testing.B) {
	pyBench(b, &agentdv1.RunRequest{Code: "1+1", Session: "bench"})
}
