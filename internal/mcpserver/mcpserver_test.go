//go:build unix

package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/mcpserver"
	"github.com/devdepot-ai/agentd/internal/testbin"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// agentctl is the built binary the tests run as an MCP server; agentdBin
// the daemon paired with a hub.
var agentctl, agentdBin string

func TestMain(m *testing.M) {
	dir, err := testbin.Temp("agentctl", "agentd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentctl, agentdBin = filepath.Join(dir, "agentctl"), filepath.Join(dir, "agentd")
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// daemon is a real agentd on a unix socket.
type daemon struct {
	addr, workspace, stateDir string
	conn                      *grpc.ClientConn
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{workspace: filepath.Join(dir, "ws"), stateDir: filepath.Join(dir, "state")}
	if err := os.Mkdir(d.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := agentd.New(t.Context(), agentd.Options{Workspace: d.workspace, StateDir: d.stateDir, Env: os.Environ(), Logger: zaptest.NewLogger(t)})
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
	d.addr = "unix://" + sock
	d.conn, err = grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return d
}

// connect runs `agentctl --addr D mcp ARGS` and connects the go-sdk
// client to it over stdio.
func connect(t *testing.T, d *daemon, opts *mcp.ClientOptions, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(agentctl, append([]string{"--addr", d.addr, "mcp"}, args...)...)
	cmd.Stderr = &testWriter{t: t}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "1.0"}, opts)
	sess, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("agentctl mcp: %s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// call calls a tool and returns its text and structured result.
func call(t *testing.T, sess *mcp.ClientSession, name string, args map[string]any) (string, map[string]any, bool) {
	t.Helper()
	res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	var structured map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &structured)
	}
	return strings.Join(texts, "\n"), structured, res.IsError
}

func toolNames(t *testing.T, sess *mcp.ClientSession) []string {
	t.Helper()
	res, err := sess.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names) // the go-sdk lists them by name
	return names
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestToolsOverStdio: the go-sdk client runs the real agentctl mcp over
// stdio against a real agentd and uses every tool; results carry what a
// model needs, failures are isError results with the daemon's message.
func TestToolsOverStdio(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	sess := connect(t, d, nil)
	if diff := cmp.Diff(toolNames(t, sess), sorted(mcpserver.AllTools)); diff != "" {
		t.Errorf("tools/list (-got +want):\n%s", diff)
	}

	type want struct {
		text    []string // substrings of the text
		isError bool
		fields  map[string]any // structured fields
	}
	steps := []struct {
		tool string
		args map[string]any
		want want
	}{
		{"sh", map[string]any{"command": "echo out; echo err >&2; exit 3"},
			want{text: []string{"out\n", "err\n", "exit code 3; id p-"}, fields: map[string]any{"exit_code": 3.0, "running": false}}},
		{"exec", map[string]any{"argv": []string{"printf", "%s", "a b"}}, want{text: []string{"a b\n[exit code 0"}, fields: map[string]any{"exit_code": 0.0}}},
		{"exec", map[string]any{"argv": []string{"/no/such/program"}}, want{text: []string{"/no/such/program"}, isError: true}},
		{"exec", map[string]any{"argv": []string{"sh", "-c", "kill -9 $$"}}, want{text: []string{"killed by signal KILL: exit code 137"}, fields: map[string]any{"exit_code": 137.0, "signal": "KILL"}}},
		{"sh", map[string]any{"command": "sleep 5", "timeout_seconds": 0.2}, want{text: []string{"timed out"}, fields: map[string]any{"exit_code": 124.0, "timed_out": true}}},
		{"sh", map[string]any{"command": "cat", "stdin": "fed"}, want{text: []string{"fed\n[exit code 0"}}},
		{"sh", map[string]any{"command": "head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"},
			want{text: []string{"bytes cut …]", "END\n[exit code 0", "of 100005 output bytes cut"}, fields: map[string]any{"cut_bytes": float64(100005 - 32<<10), "output_bytes": 100005.0}}},
		{"write_file", map[string]any{"path": "dir/a.txt", "content": "one\ntwo\nthree\n"}, want{text: []string{"created", "14 bytes"}, fields: map[string]any{"created": true, "size": 14.0}}},
		{"read_file", map[string]any{"path": "dir/a.txt", "from_line": 2, "count": 1}, want{text: []string{"     2\ttwo\n", "[lines 2–2 of 3; more follow: from_line 3]"}, fields: map[string]any{"total_lines": 3.0, "more": true}}},
		{"edit_file", map[string]any{"path": "dir/a.txt", "old_string": "two", "new_string": "TWO"}, want{text: []string{"1 replacement(s)", "+TWO"}, fields: map[string]any{"replacements": 1.0}}},
		{"edit_file", map[string]any{"path": "dir/a.txt", "old_string": "absent", "new_string": "x"}, want{text: []string{"not found"}, isError: true}},
		{"read_file", map[string]any{"path": "missing.txt"}, want{text: []string{"missing.txt does not exist"}, isError: true}},
		{"list_dir", map[string]any{"path": "dir"}, want{text: []string{"-         14  "}, fields: map[string]any{"entries": 1.0}}},
		{"grep", map[string]any{"pattern": "T.O"}, want{text: []string{"a.txt:2:TWO"}, fields: map[string]any{"matches": 1.0}}},
		{"glob", map[string]any{"pattern": "**/*.txt"}, want{text: []string{"dir/a.txt"}}},
		{"python", map[string]any{"code": "x = 6\nprint('hi')\nx * 7"}, want{text: []string{"hi\n42\n"}, fields: map[string]any{"result": "42"}}},
		{"python", map[string]any{"code": "x + 1"}, want{text: []string{"7\n"}}}, // the session kept x
		{"python", map[string]any{"code": "1/0"}, want{text: []string{"ZeroDivisionError"}}},
		{"info", nil, want{text: []string{`"workspace"`, d.workspace}}},
		{"kill", map[string]any{"id": "p-nosuch"}, want{text: []string{"p-nosuch"}, isError: true}},
		{"snapshot_diff", map[string]any{"from_id": "s-nosuch"}, want{text: []string{"s-nosuch"}, isError: true}},
	}
	for i, s := range steps {
		txt, st, isErr := call(t, sess, s.tool, s.args)
		if isErr != s.want.isError {
			t.Errorf("%d %s: isError %v, want %v; text %q", i, s.tool, isErr, s.want.isError, txt)
		}
		for _, sub := range s.want.text {
			if !strings.Contains(txt, sub) {
				t.Errorf("%d %s: text %q lacks %q", i, s.tool, txt, sub)
			}
		}
		for k, v := range s.want.fields {
			if diff := cmp.Diff(st[k], v); diff != "" {
				t.Errorf("%d %s: structured %s (-got +want):\n%s", i, s.tool, k, diff)
			}
		}
	}

	// Snapshots: take one, change a file, see the change, restore it.
	_, snap, isErr := call(t, sess, "snapshot_create", map[string]any{"label": "before"})
	if isErr {
		t.Fatalf("snapshot_create failed")
	}
	id, _ := snap["id"].(string)
	call(t, sess, "write_file", map[string]any{"path": "dir/a.txt", "content": "changed\n"})
	if txt, _, _ := call(t, sess, "snapshot_diff", map[string]any{"from_id": id}); !strings.Contains(txt, "M ") || !strings.Contains(txt, "a.txt") {
		t.Errorf("snapshot_diff: %q, want a.txt modified", txt)
	}
	if txt, _, isErr := call(t, sess, "snapshot_restore", map[string]any{"id": id}); isErr {
		t.Errorf("snapshot_restore: %s", txt)
	}
	if b, err := os.ReadFile(filepath.Join(d.workspace, "dir/a.txt")); err != nil || string(b) != "one\nTWO\nthree\n" {
		t.Errorf("after restore: %q, %v", b, err)
	}
}

// TestClientRecordedInActivity: every call carries agentd-client naming
// agentctl mcp and the MCP client (from initialize's clientInfo); the
// daemon's audit log keeps it beside the actor.
func TestClientRecordedInActivity(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	sess := connect(t, d, nil)
	call(t, sess, "write_file", map[string]any{"path": "who.txt", "content": "x"})
	b, err := os.ReadFile(filepath.Join(d.stateDir, activity.FileName))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r activity.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "files.write" {
			got = append(got, r.Client)
		}
	}
	if diff := cmp.Diff(got, []string{"agentctl-mcp/dev (mcptest 1.0)"}); diff != "" {
		t.Errorf("files.write records' client (-got +want):\n%s", diff)
	}
}

// TestExecCancelledKillsProcess: a client that cancels a long exec (the
// go-sdk sends notifications/cancelled) gets the command killed: the
// daemon sees it end by SIGKILL and its pid is gone. Its output streamed
// as progress notifications while it ran.
func TestExecCancelledKillsProcess(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	progress := make(chan string, 16)
	sess := connect(t, d, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		select {
		case progress <- r.Params.Message:
		default:
		}
	}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "sh", Arguments: map[string]any{"command": "echo started; exec sleep 300", "wait_seconds": 600}}
		p.SetProgressToken("tok-1")
		_, err := sess.CallTool(ctx, p)
		errc <- err
	}()
	select {
	case m := <-progress:
		if m != "started\n" {
			t.Errorf("progress message %q, want the output so far", m)
		}
	case err := <-errc:
		t.Fatalf("call ended before any progress: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no progress notification")
	}
	proc := running(t, d, "exec sleep 300")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	w, err := agentdv1.NewProcessServiceClient(d.conn).Wait(wctx, &agentdv1.WaitRequest{Id: proc.GetId()})
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := w.GetProcess().GetExited().GetSignal(); got != "KILL" {
		t.Errorf("the cancelled command ended with %+v, want KILL", w.GetProcess().GetExited())
	}
	if err := syscall.Kill(int(proc.GetPid()), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d after the cancel: kill -0 says %v, want ESRCH", proc.GetPid(), err)
	}
}

// running returns the daemon's running process whose command is cmd.
func running(t *testing.T, d *daemon, cmd string) *agentdv1.ProcessInfo {
	t.Helper()
	resp, err := agentdv1.NewProcessServiceClient(d.conn).List(t.Context(), &agentdv1.ProcessServiceListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetProcesses() {
		if strings.Contains(p.GetCommand(), cmd) && p.GetState() == agentdv1.ProcessState_PROCESS_STATE_RUNNING {
			return p
		}
	}
	t.Fatalf("no running process %q in %v", cmd, resp.GetProcesses())
	return nil
}

// TestStillRunningThenAttach: a command still running at wait_seconds
// returns its id (isError false, running true) and keeps running; attach
// follows it to its exit.
func TestStillRunningThenAttach(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	sess := connect(t, d, nil)
	if err := os.WriteFile(filepath.Join(d.workspace, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The command waits for the test to remove the file: no timing.
	txt, st, isErr := call(t, sess, "sh", map[string]any{"command": "echo first; while [ -e go ]; do sleep 0.05; done; echo second", "wait_seconds": 0.5})
	if isErr || st["running"] != true || !strings.Contains(txt, "first\n[still running: id p-") {
		t.Fatalf("sh: isError %v, structured %v, text %q; want running with its id", isErr, st, txt)
	}
	id := st["id"].(string)
	if err := os.Remove(filepath.Join(d.workspace, "go")); err != nil {
		t.Fatal(err)
	}
	txt, st, isErr = call(t, sess, "attach", map[string]any{"id": id, "wait_seconds": 30})
	if isErr || st["running"] != false || st["exit_code"] != 0.0 || !strings.Contains(txt, "first\nsecond\n[exit code 0; id "+id) {
		t.Errorf("attach: isError %v, structured %v, text %q; want the whole output and exit 0", isErr, st, txt)
	}
	if txt, _, isErr := call(t, sess, "attach", map[string]any{"id": "p-nosuch"}); !isErr || !strings.Contains(txt, "p-nosuch") {
		t.Errorf("attach to an unknown id: isError %v, %q", isErr, txt)
	}
}

// TestToolSelection: --read-only and --tools limit tools/list; names that
// are not tools, or that write under --read-only, are refused before
// anything starts (exit 2, the reason on stderr).
func TestToolSelection(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--read-only"}, mcpserver.ReadOnlyTools},
		{[]string{"--tools", "info,read_file"}, []string{"read_file", "info"}},
		{[]string{"--tools", "grep", "--tools", "exec"}, []string{"exec", "grep"}},
		{[]string{"--read-only", "--tools", "glob"}, []string{"glob"}},
	} {
		sess := connect(t, d, nil, c.args...)
		if diff := cmp.Diff(toolNames(t, sess), sorted(c.want)); diff != "" {
			t.Errorf("%v: tools (-got +want):\n%s", c.args, diff)
		}
		sess.Close()
	}
	// A tool not offered cannot be called.
	sess := connect(t, d, nil, "--read-only")
	if _, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "x", "content": "y"}}); err == nil {
		t.Error("write_file under --read-only: no error")
	}
	if _, err := os.Stat(filepath.Join(d.workspace, "x")); !os.IsNotExist(err) {
		t.Errorf("write_file under --read-only wrote x: %v", err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tools", "exec,nope"}, `unknown tool "nope": the tools are exec, sh,`},
		{[]string{"--read-only", "--tools", "exec"}, `tool "exec" changes things and --read-only offers only attach,`},
		{[]string{"--tools", ","}, "--tools: name at least one of exec"},
		{[]string{"--http", "0.0.0.0:0"}, `--http "0.0.0.0:0": not a loopback address; serve on 127.0.0.1:PORT, or give --http-token-file FILE`},
		{[]string{"--http", ":0"}, "not a loopback address"},
		{[]string{"--http-token-file", "/dev/null"}, "--http-token-file guards --http"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(agentctl, append([]string{"--addr", d.addr, "mcp"}, c.args...)...)
		cmd.Stderr = &stderr
		cmd.Stdin = strings.NewReader("")
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: %v, stderr %q; want exit 2 and %q", c.args, err, stderr.String(), c.want)
		}
	}
}

// serveHTTP starts `agentctl mcp --http 127.0.0.1:0 ARGS` and returns its URL.
func serveHTTP(t *testing.T, d *daemon, args ...string) string {
	t.Helper()
	cmd := exec.Command(agentctl, append([]string{"--addr", d.addr, "mcp", "--http", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "agentctl mcp: serving MCP (streamable HTTP) on "); ok {
			go func() { // drains stderr until the process ends (Cleanup waits for it)
				for sc.Scan() {
				}
			}()
			return u
		}
		t.Logf("agentctl mcp: %s", sc.Text())
	}
	t.Fatal("agentctl mcp --http did not say where it serves")
	return ""
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestHTTP: over streamable HTTP, the go-sdk client calls tools; with
// --http-token-file a request without the token, or with another, gets 401
// and nothing runs.
func TestHTTP(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	tokFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		args  []string
		token string
	}{
		{"loopback", nil, ""},
		{"token", []string{"--http-token-file", tokFile}, "s3cret"},
	} {
		u := serveHTTP(t, d, c.args...)
		hc := &http.Client{Transport: http.DefaultTransport}
		if c.token != "" {
			hc.Transport = bearer{c.token, http.DefaultTransport}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "httptest", Version: "2"}, nil)
		sess, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: u, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", c.name, err)
		}
		txt, st, isErr := call(t, sess, "sh", map[string]any{"command": "echo over-http"})
		if isErr || st["exit_code"] != 0.0 || !strings.Contains(txt, "over-http\n") {
			t.Errorf("%s: sh: %v %v %q", c.name, isErr, st, txt)
		}
		sess.Close()
		hc.CloseIdleConnections()
		if c.token == "" {
			continue
		}
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "s3cret"} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("Authorization %q: %s, want 401", auth, resp.Status)
			}
		}
	}
}

// TestProgressSpaced: output written in many small pieces reaches a client
// with a progress token as few notifications (at most one per 100 ms, the
// last at the exit), whose messages, in progress order, are the output and
// whose last progress is the whole output's size.
func TestProgressSpaced(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	type note struct {
		msg      string
		progress float64
	}
	var (
		mu    sync.Mutex
		notes []note
	)
	whole := make(chan struct{}) // closed when a notification reports all 150 bytes
	sess := connect(t, d, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, note{r.Params.Message, r.Params.Progress})
		if r.Params.Progress == 150 {
			close(whole)
		}
	}})
	p := &mcp.CallToolParams{Name: "sh", Arguments: map[string]any{"command": "i=10; while [ $i -lt 60 ]; do echo $i; sleep 0.01; i=$((i+1)); done"}}
	p.SetProgressToken(7)
	start := time.Now()
	res, err := sess.CallTool(t.Context(), p)
	elapsed := time.Since(start)
	if err != nil || res.IsError {
		t.Fatalf("sh: %v %v", err, res)
	}
	// The go-sdk client may run notification handlers after the result.
	select {
	case <-whole:
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification reported the whole output (150 bytes)")
	}
	mu.Lock()
	defer mu.Unlock()
	if max := int(elapsed/(100*time.Millisecond)) + 2; len(notes) > max || len(notes) >= 50 {
		t.Errorf("%d notifications for 50 lines in %v; want at most %d", len(notes), elapsed, max)
	}
	slices.SortFunc(notes, func(a, b note) int { return int(a.progress - b.progress) })
	var all strings.Builder
	for _, n := range notes {
		all.WriteString(n.msg)
	}
	var want strings.Builder
	for i := 10; i < 60; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if diff := cmp.Diff(all.String(), want.String()); diff != "" {
		t.Errorf("progress messages joined (-got +want):\n%s", diff)
	}
}
