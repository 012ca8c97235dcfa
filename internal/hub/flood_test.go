package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/testbin"
)

// These tests run the real agenthub binary as a child process, under a low
// file descriptor limit (prlimit sets the hard limit too: Go raises only
// the soft one to it), and flood it the way a hostile client would.

var (
	hubBinOnce sync.Once
	hubBinDir  string
	hubBinErr  error
)

// agenthubBin builds cmd/agenthub once for the package's process tests.
func agenthubBin(t *testing.T) string {
	t.Helper()
	hubBinOnce.Do(func() { hubBinDir, hubBinErr = testbin.Temp("agenthub") })
	if hubBinErr != nil {
		t.Fatal(hubBinErr)
	}
	return filepath.Join(hubBinDir, "agenthub")
}

// hubProc is an agenthub serve process of the test.
type hubProc struct {
	cmd *exec.Cmd
	url string // http://127.0.0.1:PORT
	// metricsURL is --metrics-listen's http://ADDR/metrics, if given.
	metricsURL string
	addr       string
	token      string // the owner's
	done       chan struct{}
	err        error
	log        *syncBuffer
}

// startHubProc runs agenthub init and serve (sandboxes off, loopback, a
// new SQLite file) with RLIMIT_NOFILE nofile (0: the test's own), and
// waits for it to serve.
func startHubProc(t *testing.T, nofile int, args ...string) *hubProc {
	t.Helper()
	if _, err := exec.LookPath("prlimit"); err != nil && nofile > 0 {
		t.Skip("prlimit (util-linux) is not installed")
	}
	bin := agenthubBin(t)
	db := filepath.Join(t.TempDir(), "hub.db")
	out, err := exec.CommandContext(t.Context(), bin, "init", "--db", db).Output()
	if err != nil {
		t.Fatalf("agenthub init: %v", err)
	}
	p := &hubProc{token: strings.TrimSpace(string(out)), done: make(chan struct{}), log: &syncBuffer{}}
	argv := append([]string{bin, "serve", "--listen", "127.0.0.1:0", "--db", db, "--sandboxes", "off"}, args...)
	if nofile > 0 {
		n := strconv.Itoa(nofile)
		argv = append([]string{"prlimit", "--nofile=" + n + ":" + n, "--"}, argv...)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	pr, pw := io.Pipe()
	p.cmd.Stdout = p.log
	p.cmd.Stderr = io.MultiWriter(p.log, pw)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("agenthub did not stop within 10 s of SIGTERM; killed")
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			t.Logf("agenthub's output:\n%s", p.log.String())
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var l struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "serving metrics" {
				p.metricsURL = l.URL // before "serving"
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "serving" && l.URL != "" {
				urls <- l.URL
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case p.url = <-urls:
	case <-p.done:
		t.Fatalf("agenthub serve exited before serving: %v", p.err)
	case <-time.After(60 * time.Second):
		t.Fatal("agenthub serve: no 'serving' line within 60 s")
	}
	p.addr = strings.TrimPrefix(p.url, "http://")
	return p
}

func (p *hubProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// healthz GETs /healthz from the loopback address from (127.0.0.1 is
// the ordinary client) on a new connection.
func (p *hubProc) healthz(ctx context.Context, from string) error {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// flood opens n connections to addr from the loopback addresses froms
// (round robin) that send nothing, and closes them when the test ends.
func flood(t *testing.T, addr string, n int, froms ...string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(froms[i%len(froms)])}, Timeout: 10 * time.Second}
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatalf("dial %d of the flood: %v", i, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// held counts the connections the hub still holds open after wait: those
// it refused are closed at once, the rest wait for their first bytes.
func held(conns []net.Conn, wait time.Duration) int {
	var n sync.WaitGroup
	var mu sync.Mutex
	open := 0
	deadline := time.Now().Add(wait)
	for _, c := range conns {
		n.Go(func() {
			_ = c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				mu.Lock()
				open++
				mu.Unlock()
			}
		})
	}
	n.Wait()
	return open
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// waitHealthy polls /healthz until it answers or 30 s pass.
func (p *hubProc) waitHealthy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.healthz(t.Context(), "127.0.0.1")
		if err == nil {
			return
		}
		if p.exited() {
			t.Fatalf("agenthub exited (%v)", p.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz after the flood: %v for 30 s", err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// A client that opens more connections than the hub has file descriptors
// gets its cap, the rest closed at once; the hub goes on serving others.
// Then a flood from many addresses, larger than the hub's descriptor
// limit: the hub refuses the excess, stays up, and serves again once the
// flood ends. (Before: "accept4: too many open files" ended agenthub
// serve.)
func TestHubSurvivesConnectionFlood(t *testing.T) {
	t.Parallel()
	const nofile, perClient = 256, 40
	p := startHubProc(t, nofile, "--max-conns-per-client", strconv.Itoa(perClient))

	// One hostile address: 2× the descriptor limit.
	one := flood(t, p.addr, 2*nofile, "127.0.0.2")
	if got := held(one, 2*time.Second); got != perClient {
		t.Errorf("the hub holds %d of one address's %d connections, want its cap %d", got, len(one), perClient)
	}
	if err := p.healthz(t.Context(), "127.0.0.1"); err != nil {
		t.Errorf("/healthz from another address during one address's flood: %v", err)
	}
	closeAll(one)

	// Many addresses, each under its cap, together 3× the limit.
	var froms []string
	for i := range 30 {
		froms = append(froms, "127.0.1."+strconv.Itoa(i+1))
	}
	many := flood(t, p.addr, 3*nofile, froms...)
	if got := held(many, 2*time.Second); got >= nofile {
		t.Errorf("the hub holds %d connections with %d file descriptors", got, nofile)
	}
	if p.exited() {
		t.Fatalf("agenthub exited during the flood: %v", p.err)
	}
	closeAll(many)
	p.waitHealthy(t)

	code, body := getMetrics(t, p.url, p.token)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for l := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "agenthub_connections_refused_total "); ok {
			if n, _ := strconv.Atoi(v); n < 2*nofile-perClient {
				t.Errorf("agenthub_connections_refused_total %d, want at least %d", n, 2*nofile-perClient)
			}
			return
		}
	}
	t.Errorf("/metrics has no agenthub_connections_refused_total:\n%s", body)
}
