package hub_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

// forward runs `agentctl ARGS... port forward SPECS...` in-process and
// returns the local addresses it prints, in order, and a stop that ends
// it (as Ctrl-C would: its context is cancelled) and returns its exit
// code and stderr.
func forward(t *testing.T, args ...string) (addrs []string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := ctl.Main(ctx, args, ctl.IO{In: strings.NewReader(""), Out: pw, Err: &errb})
		pw.Close()
		done <- code
	}()
	n := len(args) - slices.Index(args, "forward") - 1 // one line per spec
	sc := bufio.NewScanner(pr)
	for len(addrs) < n && sc.Scan() {
		f := strings.Fields(sc.Text()) // Forwarding from 127.0.0.1:PORT -> REMOTE
		if len(f) != 5 || f[0] != "Forwarding" {
			t.Fatalf("port forward printed %q", sc.Text())
		}
		addrs = append(addrs, f[2])
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if len(addrs) < n {
		cancel()
		code := <-done
		t.Fatalf("port forward exited %d before listening: %s", code, errb.String())
	}
	var code *int
	stop = func() (int, string) {
		if code == nil {
			cancel()
			c := <-done
			code = &c
		}
		return *code, errb.String()
	}
	t.Cleanup(func() { stop() })
	return addrs, stop
}

// echoRoundTrip sends n random bytes through addr, half-closes, and
// checks the same bytes come back followed by EOF.
func echoRoundTrip(t *testing.T, addr string, n int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	want := make([]byte, n)
	_, _ = rand.Read(want)
	go func() {
		_, _ = c.Write(want)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("echo through %s: %d of %d bytes back (equal %v), err %v", addr, len(got), n, bytes.Equal(got, want), err)
	}
}

// tcpEcho listens on loopback and echoes each connection until EOF.
func tcpEcho(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// port forward through the hub to a paired machine carries a TCP echo (4
// MiB both ways, two connections at once) and a real PostgreSQL session;
// interrupting it stops the listener, and it exits 0.
func TestPortForwardThroughHub(t *testing.T) {
	cluster, err := pgtest.Start()
	if err != nil {
		t.Skipf("no PostgreSQL: %v", err)
	}
	t.Cleanup(cluster.Stop)
	dbURL, err := cluster.NewDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t)
	m := h.startMachine(h.owner)
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.owner), 0o600); err != nil {
		t.Fatal(err)
	}
	echoPort := tcpEcho(t)
	pgPort := strings.Split(strings.Split(dbURL, "@127.0.0.1:")[1], "/")[0]
	addrs, stop := forward(t, "--hub", h.url, "--machine", m.id, "--token-file", tf, "port", "forward", ":"+strconv.Itoa(echoPort), "0:"+pgPort)

	done := make(chan struct{})
	go func() {
		defer close(done)
		echoRoundTrip(t, addrs[0], 4<<20)
	}()
	echoRoundTrip(t, addrs[0], 1<<20)
	<-done

	local := strings.Replace(dbURL, "127.0.0.1:"+pgPort, addrs[1], 1)
	pg, err := pgx.Connect(t.Context(), local)
	if err != nil {
		t.Fatalf("postgres through the forward (%s): %v", local, err)
	}
	var sum int
	var db string
	if err := pg.QueryRow(t.Context(), "SELECT sum(x)::int, current_database() FROM generate_series(1, 1000) AS x").Scan(&sum, &db); err != nil || sum != 500500 {
		t.Errorf("query through the forward: %d, %v; want 500500", sum, err)
	}
	if !strings.Contains(dbURL, "/"+db) {
		t.Errorf("connected to database %q, want the one of %s", db, dbURL)
	}
	_ = pg.Close(t.Context())

	code, stderr := stop()
	if code != 0 || stderr != "" {
		t.Errorf("after interrupt: exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	if c, err := net.Dial("tcp", addrs[0]); err == nil {
		c.Close()
		t.Errorf("%s still accepts after the forward ended", addrs[0])
	}
}

// A connection to a port nothing listens on is closed at once, and the
// reason is printed; the forward stays up for the next connection.
func TestPortForwardNothingListening(t *testing.T) {
	h := startHub(t)
	m := h.startMachine(h.owner)
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.owner), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addrs, stop := forward(t, "--hub", h.url, "--machine", m.id, "--token-file", tf, "port", "forward", "0:"+strconv.Itoa(dead))
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Errorf("read: %q %v; want EOF at once", b, err)
	}
	c.Close()
	code, stderr := stop()
	want := fmt.Sprintf("to port %d: unavailable: nothing listens on 127.0.0.1:%d", dead, dead)
	if code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 0 and %q", code, stderr, want)
	}
}

// Bad specs are usage errors that listen on nothing.
func TestPortForwardBadSpecs(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"0", "70000", "x", "a:80", "localhost:80:80", "1:2:3", "8080:"} {
		var out, errb bytes.Buffer
		code := ctl.Main(t.Context(), []string{"--addr", "unix:///nonexistent.sock", "port", "forward", spec}, ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), strconv.Quote(spec)) {
			t.Errorf("forward %s: exit %d, stdout %q, stderr %q; want 2 and a message naming it", spec, code, out.String(), errb.String())
		}
	}
}

// lsPort is one row of agentctl --json port ls.
type lsPort struct {
	Port    int    `json:"port"`
	Address string `json:"address"`
	Pid     int    `json:"pid"`
	Command string `json:"command"`
}

// waitListening polls agentctl --json port ls (run runs agentctl against
// the target and returns its stdout) until every port listens, and
// returns the rows by port; it fails t after timeout.
func waitListening(t *testing.T, run func(args ...string) string, timeout time.Duration, ports ...int) map[int]lsPort {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; {
		var resp struct{ Ports []lsPort }
		if err := json.Unmarshal([]byte(run("--json", "port", "ls")), &resp); err != nil {
			t.Fatal(err)
		}
		seen := map[int]lsPort{}
		for _, p := range resp.Ports {
			seen[p.Port] = p
		}
		if !slices.ContainsFunc(ports, func(p int) bool { _, ok := seen[p]; return !ok }) {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("port ls never showed all of %v: %v", ports, seen)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// In a builtin sandbox with network none: port ls shows the servers the
// agent started (with their owner), port forward carries a TCP echo and
// python3 -m http.server's pages, dialled by agentd inside, and a public
// preview URL serves the same pages to a client without credentials
// and is listed on the environment's console page.
func TestPortSandbox(t *testing.T) {
	h := startSandboxHubWith(t, nil, hubtest.Options{Preview: true})
	cli := h.agentctl()
	target := []string{"--env", "builtin", "--conversation", "ports"}
	run := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(append(target, args...)...)
		if code != 0 {
			t.Fatalf("agentctl %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}
	const echoPy = `import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7007))
s.listen()
def serve(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.shutdown(socket.SHUT_WR)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`
	run("sh", "printf '<h1>hello from the sandbox</h1>' > /workspace/index.html")
	run("exec", "--detach", "--", "python3", "-c", echoPy)
	run("exec", "--detach", "--cwd", "/workspace", "--", "python3", "-m", "http.server", "8000", "--bind", "0.0.0.0")

	seen := waitListening(t, run, 30*time.Second, 7007, 8000)
	if p := seen[7007]; p.Address != "127.0.0.1" || p.Pid == 0 || !strings.HasPrefix(p.Command, "python3 -c") {
		t.Errorf("7007: %+v; want 127.0.0.1, the python3 -c process", p)
	}
	if p := seen[8000]; p.Address != "0.0.0.0" || !strings.Contains(p.Command, "http.server 8000") {
		t.Errorf("8000: %+v; want 0.0.0.0, http.server", p)
	}

	code, out, errs := cli(append(target, "port", "ls")...)
	if code != 0 || !strings.HasPrefix(out, "PORT") || !strings.Contains(out, "http.server") {
		t.Errorf("port ls: exit %d\n%s%s", code, out, errs)
	}

	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs, stop := forward(t, append(append([]string{"--hub", h.URL, "--token-file", tf}, target...), "port", "forward", "0:7007", "0:8000")...)
	echoRoundTrip(t, addrs[0], 1<<20)
	resp, err := http.Get("http://" + addrs[1] + "/index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "<h1>hello from the sandbox</h1>" {
		t.Errorf("GET through the forward: %d %q", resp.StatusCode, body)
	}
	if code, stderr := stop(); code != 0 || stderr != "" {
		t.Errorf("after interrupt: exit %d, stderr %q", code, stderr)
	}

	u := strings.TrimSpace(run("port", "expose", "8000", "--access", "public"))
	resp, err = http.Get(u + "index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "<h1>hello from the sandbox</h1>" {
		t.Errorf("GET %sindex.html: %d %q", u, resp.StatusCode, body)
	}

	// A visit to a paused sandbox's preview wakes it, as a call does.
	var id string
	for _, sb := range h.listSandboxes() {
		if sb.GetConversation() == "ports" {
			id = sb.GetId()
		}
	}
	// The environment's console page lists the sandbox's preview.
	b := newBrowser(t, h.URL)
	b.signIn(h.Token)
	if p := b.get("/console/environments/builtin"); !strings.Contains(p.body, "Previews of its sandboxes") || !strings.Contains(p.body, ">"+id+"</a>") ||
		!strings.Contains(p.body, "<td>8000</td>") {
		t.Errorf("the builtin environment's page does not list the preview of %s:\n%s", id, p.body)
	}
	if code, out, errs := cli("sandbox", "pause", id); code != 0 {
		t.Fatalf("sandbox pause %s: exit %d %s%s", id, code, out, errs)
	}
	resp, err = http.Get(u + "index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "<h1>hello from the sandbox</h1>" {
		t.Errorf("GET %sindex.html of the paused sandbox: %d %q", u, resp.StatusCode, body)
	}
	for _, sb := range h.listSandboxes() {
		if sb.GetId() == id && sb.GetState() != "running" {
			t.Errorf("after the visit, sandbox %s is %s, want running", id, sb.GetState())
		}
	}
}
