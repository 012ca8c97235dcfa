package nginxe2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/hub/pairing"
)

// machine is a real `agentd run`, paired through nginx.
type machine struct {
	id        string
	workspace string
	p         *proc
}

// pairMachine pairs an agentd through nginx and starts `agentd run`.
func (c *cluster) pairMachine(t testing.TB) *machine {
	t.Helper()
	code := c.agentctl(t, c.URL, "admin", "pair-code", "create")
	if code.code != 0 {
		t.Fatalf("admin pair-code create through nginx: %+v", code)
	}
	dir := mkdir(t, c.dir, "machine")
	m := &machine{workspace: mkdir(t, dir, "ws")}
	env := append(c.clientEnv(t, "agentd"), "SHELL=/bin/sh",
		"AGENTD_CONFIG_DIR="+filepath.Join(dir, "config"), "AGENTD_STATE_DIR="+filepath.Join(dir, "state"))
	pair := run(t, env, bin("agentd"), "pair", "--hub", c.URL, "--ca-file", c.pki.CAFile, "--name", "box", "--code", strings.TrimSpace(code.stdout))
	if pair.code != 0 {
		t.Fatalf("agentd pair through nginx: %+v", pair)
	}
	m.id = strings.TrimSpace(pair.stdout)
	m.p = startProc(t, "agentd", env, syscall.SIGTERM, bin("agentd"), "run", "--workspace", m.workspace, "--socket", "-")
	waitFor(t, 20*time.Second, "the machine's tunnel on a replica", func() bool { return c.holder(t) != nil })
	return m
}

// TestThreeReplicasBehindNginx runs the scenarios in order on one
// deployment: calls through nginx reach the machine whichever replica
// they land on; a pairing code's wrong tries count across replicas; the
// replica holding the tunnel is killed in the middle of a 1 GiB stream
// and attach --from 0 returns every byte; a revoke sent to a replica that
// does not hold the tunnel cuts it.
func TestThreeReplicasBehindNginx(t *testing.T) {
	c := startCluster(t)
	m := c.pairMachine(t)
	t.Logf("machine %s paired through nginx; tunnel on replica %s", m.id, c.holder(t).name)

	if !t.Run("calls land on every replica", func(t *testing.T) { testCallsEverywhere(t, c, m) }) {
		return
	}
	t.Run("wrong pairing tries count across replicas", func(t *testing.T) { testPairingLockout(t, c) })
	t.Run("pairing rate limit per client behind nginx", func(t *testing.T) { testRateLimitPerClient(t, c) })
	if !t.Run("kill -9 the holder mid-stream, call forwarded", func(t *testing.T) { testFailoverMidStream(t, c, m, 1<<30, false) }) {
		return
	}
	if !t.Run("the killed replica restarts", func(t *testing.T) { testRestart(t, c, m) }) {
		return
	}
	if !t.Run("kill -9 the holder mid-stream, call on it", func(t *testing.T) { testFailoverMidStream(t, c, m, 256<<20, true) }) {
		return
	}
	t.Run("revoke on another replica cuts the tunnel", func(t *testing.T) { testRevokeElsewhere(t, c, m) })
}

// testCallsEverywhere: twelve calls through nginx, round robin over the
// three replicas (two of which forward to the holder); each returns its
// own output and exit code, and each replica served some.
func testCallsEverywhere(t *testing.T, c *cluster, m *machine) {
	before := make([]int64, len(c.replicas))
	for i, r := range c.replicas {
		before[i] = c.metric(t, r, "agenthub_grpc_calls_total")
	}
	const n = 12
	for i := range n {
		got := c.agentctl(t, c.URL, "--machine", m.id, "sh", fmt.Sprintf("echo out %d; echo err %d >&2; exit %d", i, i, i%5))
		want := result{i % 5, fmt.Sprintf("out %d\n", i), fmt.Sprintf("err %d\n", i)}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("call %d through nginx (-got +want):\n%s", i, diff)
		}
	}
	total := int64(0)
	for i, r := range c.replicas {
		d := c.metric(t, r, "agenthub_grpc_calls_total") - before[i]
		t.Logf("replica %s took %d gRPC calls", r.name, d)
		if d == 0 {
			t.Errorf("replica %s took none of the %d calls through nginx", r.name, n)
		}
		total += d
	}
	if total < n {
		t.Errorf("the replicas took %d gRPC calls, want at least %d", total, n)
	}
}

// testPairingLockout: five wrong tries at one code, by real `agentd pair`
// runs, one straight to each replica and two through nginx (whose
// X-Forwarded-For the replicas trust), lock the code: the right code then
// fails as locked, through nginx, and no machine was added.
func testPairingLockout(t *testing.T, c *cluster) {
	created := c.agentctl(t, c.URL, "admin", "pair-code", "create")
	if created.code != 0 {
		t.Fatalf("admin pair-code create: %+v", created)
	}
	code := strings.TrimSpace(created.stdout)
	last := strings.IndexByte(pairing.Alphabet, code[len(code)-1])
	wrong := code[:len(code)-1] + string(pairing.Alphabet[(last+1)%len(pairing.Alphabet)])
	pair := func(i int, hub, code string) result {
		env := append(c.clientEnv(t, "pairing"), "AGENTD_CONFIG_DIR="+filepath.Join(c.dir, fmt.Sprintf("pairing-%d", i)))
		return run(t, env, bin("agentd"), "pair", "--hub", hub, "--ca-file", c.pki.CAFile, "--code", code)
	}
	for i, via := range []struct{ name, url string }{
		{"replica A", c.replicas[0].URL()}, {"replica B", c.replicas[1].URL()}, {"replica C", c.replicas[2].URL()},
		{"nginx", c.URL}, {"nginx", c.URL},
	} {
		got := pair(i, via.url, wrong)
		if got.code == 0 || !strings.Contains(got.stderr, "pairing code not recognised") {
			t.Errorf("wrong try %d, to %s: %+v; want refused as not recognised", i+1, via.name, got)
		}
	}
	got := pair(5, c.URL, code)
	if got.code == 0 || !strings.Contains(got.stderr, "locked after 5 wrong attempts") {
		t.Errorf("the right code after five wrong tries, through nginx: %+v; want refused as locked", got)
	}
	ms := c.agentctl(t, c.URL, "--json", "machines")
	var list struct {
		Machines []struct{ ID string } `json:"machines"`
	}
	if err := json.Unmarshal([]byte(ms.stdout), &list); err != nil || len(list.Machines) != 1 {
		t.Errorf("machines after the locked code: %+v (%v); want the one paired before", ms, err)
	}
}

// hashWriter hashes and counts what it is given, and closes reached once
// mark bytes have come.
type hashWriter struct {
	h       hash.Hash
	n       atomic.Int64
	mark    int64
	reached chan struct{}
}

func newHashWriter(mark int64) *hashWriter {
	return &hashWriter{h: sha256.New(), mark: mark, reached: make(chan struct{})}
}

func (w *hashWriter) Write(p []byte) (int, error) {
	w.h.Write(p)
	n := w.n.Add(int64(len(p)))
	if n >= w.mark && n-int64(len(p)) < w.mark {
		close(w.reached)
	}
	return len(p), nil
}

func (w *hashWriter) sum() string { return hex.EncodeToString(w.h.Sum(nil)) }

// testFailoverMidStream: a command writes 1 GiB of random bytes (and
// their sha256 to a file) to a client through nginx, retaining all of it
// (--retain-head 1G). Once 64 MiB have arrived, the replica holding the
// machine's tunnel is killed with SIGKILL. The client's call fails
// UNAVAILABLE and agentctl reattaches by itself; agentd reconnects through
// nginx to a surviving replica; the client ends with every byte, and
// attach --from 0 through nginx returns every byte too.
func testFailoverMidStream(t *testing.T, c *cluster, m *machine, size int64, onHolder bool) {
	sumFile := filepath.Join(m.workspace, fmt.Sprintf("stream-%d.sha256", size))
	script := fmt.Sprintf(`set -e; d=$(mktemp -d); mkfifo "$d/p"; sha256sum < "$d/p" > %s & head -c %d /dev/urandom | tee "$d/p"; wait; rm -r "$d"`, sumFile, size)
	h := c.holder(t)
	if h == nil {
		t.Fatal("no replica holds the tunnel")
	}
	target := h
	if !onHolder {
		if target = c.nextGRPC(t); target == h {
			target = c.nextAfter(target)
		}
	}
	st := c.startStream(t, m, target, script, size/16)
	killed := time.Now()
	h.p.kill9(t)
	back := waitFor(t, 30*time.Second, "the tunnel back on a surviving replica", func() bool { return c.holder(t) != nil })
	t.Logf("kill -9 replica %s, which holds the tunnel: agentd reconnected through nginx to replica %s %s later", h.name, c.holder(t).name, back.Round(time.Millisecond))

	var shErr error
	select {
	case shErr = <-st.done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("agentctl sh still running 5 min after the kill; stderr %q", st.stderr.String())
	}
	t.Logf("agentctl sh: %v after %s, %d bytes, stderr %q", shErr, time.Since(killed).Round(time.Millisecond), st.out.n.Load(), st.stderr.String())
	// The call through the dead replica failed (UNAVAILABLE from the
	// replica that forwarded it; a stream reset by nginx when the call was
	// on the dead replica itself); agentctl reattached by itself, through
	// nginx, where it had left off.
	lost := "connection lost (unavailable"
	if onHolder {
		lost = "connection lost (stream terminated by RST_STREAM"
	}
	if errs := st.stderr.String(); !strings.Contains(errs, lost) || strings.Count(errs, "\n") != 1 {
		t.Errorf("agentctl sh's stderr %q: want the lost call reported once (%s…)", errs, lost)
	}
	att, attErr := c.attachAll(t, m, c.processWith(t, m, sumFile))
	data, err := os.ReadFile(sumFile)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := strings.Cut(string(data), " ")
	if got := st.out.n.Load(); shErr != nil || got != size || st.out.sum() != want {
		t.Errorf("agentctl sh across the failover: %v, %d bytes, sha256 %s; want exit 0, %d bytes, sha256 %s", shErr, got, st.out.sum(), size, want)
	}
	if got := att.n.Load(); got != size || att.sum() != want || attErr != "" {
		t.Errorf("attach --from 0: %d bytes, sha256 %s, stderr %q; want %d bytes, sha256 %s, no gap", got, att.sum(), attErr, size, want)
	}
}

// stream is an `agentctl sh` writing a long output, running.
type stream struct {
	out    *hashWriter
	stderr *logBuffer
	done   chan error // its exit
}

// startStream starts `agentctl sh --retain-head 1G script` through nginx,
// steered to land on target, and returns once mark bytes have arrived.
func (c *cluster) startStream(t testing.TB, m *machine, target *replica, script string, mark int64) *stream {
	t.Helper()
	c.steer(t, m, target)
	before := c.calls(t)
	st := &stream{out: newHashWriter(mark), stderr: &logBuffer{}, done: make(chan error, 1)}
	cmd := exec.CommandContext(t.Context(), bin("agentctl"), "--hub", c.URL, "--machine", m.id, "sh", "--retain-head", "1G", script)
	cmd.Env = c.clientEnv(t, "agentctl")
	cmd.Stdout, cmd.Stderr = st.out, st.stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { st.done <- cmd.Wait() }()
	select {
	case <-st.out.reached:
	case err := <-st.done:
		t.Fatalf("agentctl sh ended (%v) after %d bytes; stderr %q", err, st.out.n.Load(), st.stderr.String())
	}
	after := c.calls(t)
	landed := "none"
	for i, r := range c.replicas {
		if after[i] > before[i] {
			landed = r.name
		}
	}
	if landed != target.name {
		t.Errorf("the stream's call landed on replica %s, want %s", landed, target.name)
	}
	t.Logf("%d MiB through nginx and replica %s in %s", st.out.n.Load()>>20, landed, time.Since(start).Round(time.Millisecond))
	return st
}

// processWith returns the id of the machine's process whose command line
// has s in it, from ps through nginx.
func (c *cluster) processWith(t testing.TB, m *machine, s string) string {
	t.Helper()
	ps := c.agentctl(t, c.URL, "--machine", m.id, "ps")
	for _, line := range strings.Split(ps.stdout, "\n") {
		if strings.Contains(line, s) {
			id, _, _ := strings.Cut(line, " ")
			return id
		}
	}
	t.Fatalf("ps through nginx has no process with %q: %+v", s, ps)
	return ""
}

// attachAll runs `agentctl attach ID --from 0` through nginx to its end and
// returns its stdout's hash and its stderr.
func (c *cluster) attachAll(t testing.TB, m *machine, id string) (*hashWriter, string) {
	t.Helper()
	out, errb := newHashWriter(1<<62), &logBuffer{}
	attach := exec.CommandContext(t.Context(), bin("agentctl"), "--hub", c.URL, "--machine", m.id, "attach", id, "--from", "0")
	attach.Env = c.clientEnv(t, "agentctl")
	attach.Stdout, attach.Stderr = out, errb
	start := time.Now()
	if err := attach.Run(); err != nil {
		t.Fatalf("attach %s --from 0 through nginx: %v after %d bytes; stderr %q", id, err, out.n.Load(), errb.String())
	}
	t.Logf("attach --from 0 through nginx: %d bytes in %s", out.n.Load(), time.Since(start).Round(time.Millisecond))
	return out, errb.String()
}

// testRestart: the killed replica starts again on its addresses; nginx
// sends calls to it again once its 5 s fail_timeout has passed.
func testRestart(t *testing.T, c *cluster, m *machine) {
	var dead *replica
	for _, r := range c.replicas {
		if r.p.exited() {
			dead = r
		}
	}
	if dead == nil {
		t.Fatal("no replica is down")
	}
	c.startReplica(t, dead)
	c.waitHealthy(t, dead.URL(), dead.p)
	n := c.metric(t, dead, "agenthub_grpc_calls_total")
	took := waitFor(t, 20*time.Second, "a call through nginx on the restarted replica", func() bool {
		if r := c.agentctl(t, c.URL, "--machine", m.id, "sh", "echo back"); r.code != 0 || r.stdout != "back\n" {
			t.Fatalf("a call through nginx: %+v", r)
		}
		return c.metric(t, dead, "agenthub_grpc_calls_total") > n
	})
	t.Logf("replica %s restarted; nginx sent it a call %s later", dead.name, took.Round(time.Millisecond))
}

// testRevokeElsewhere: a revoke sent straight to a replica that does not
// hold the machine's tunnel cuts it on the one that does (LISTEN/NOTIFY),
// agentd is told it was removed, and calls for it through nginx fail.
func testRevokeElsewhere(t *testing.T, c *cluster, m *machine) {
	h := c.holder(t)
	if h == nil {
		t.Fatal("no replica holds the tunnel")
	}
	var other *replica
	for _, r := range c.replicas {
		if r != h && !r.p.exited() {
			other = r
		}
	}
	start := time.Now()
	if r := c.agentctl(t, other.URL(), "admin", "revoke", m.id); r.code != 0 {
		t.Fatalf("admin revoke on replica %s: %+v", other.name, r)
	}
	sent := time.Since(start)
	waitFor(t, 10*time.Second, "the tunnel cut", func() bool { return c.metric(t, h, "agenthub_tunnels") == 0 })
	cut := time.Since(start)
	waitFor(t, 10*time.Second, "agentd told it was removed", func() bool { return strings.Contains(m.p.log.String(), "removed from org") })
	told := time.Since(start)
	t.Logf("revoke sent to replica %s (agentctl ran %s): replica %s's tunnel gone, and agentd told, within %s and %s of its start",
		other.name, sent.Round(time.Millisecond), h.name, cut.Round(time.Millisecond), told.Round(time.Millisecond))
	if told > 3*time.Second {
		t.Errorf("agentd learned of the revoke %s after agentctl admin revoke started, want within 3 s", told)
	}
	r := c.agentctl(t, c.URL, "--machine", m.id, "sh", "echo should not run")
	if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "was removed from org") {
		t.Errorf("a call for the revoked machine through nginx: %+v; want 125 saying it was removed", r)
	}
}
