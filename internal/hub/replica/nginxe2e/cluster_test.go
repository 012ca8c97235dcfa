package nginxe2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

const (
	// confPath is the nginx configuration docs/deploy.md shows.
	confPath = "../../../../docs/nginx/agenthub.conf"
	// nginxIP is the address nginx listens on; the replicas get the
	// next three. All of 127.0.0.0/8 is loopback on Linux.
	nginxIP = "127.0.0.10"
	// replicaDNS is the name nginx checks the replicas' certificate for
	// (proxy_ssl_name and grpc_ssl_name in the configuration).
	replicaDNS = "agenthub-replica.internal"
)

// replica is one `agenthub serve` process.
type replica struct {
	name     string // A, B, C
	addr     string // host:port of its public (TLS) listener
	internal string // host:port of --internal-addr
	p        *proc
}

// URL is the replica's own address, past nginx.
func (r *replica) URL() string { return "https://" + r.addr }

// cluster is PostgreSQL, three replicas and nginx in front of them.
type cluster struct {
	owner    testing.TB // the test that stops the processes
	dir      string
	pki      *pki
	token    string // the owner's API token (agenthub init)
	replicas []*replica
	nginx    *proc
	URL      string       // nginx's https:// URL: what daemons and clients are given
	http     *http.Client // trusts the test CA
	db       string       // the Postgres URL
	cert     string       // the replicas' certificate and key
	key      string
}

// startCluster starts everything, or skips the test when nginx or the
// PostgreSQL server binaries are missing.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	nginxBin := findNginx(t)
	db := pgtest.Database(t)
	dir := t.TempDir()
	c := &cluster{owner: t, dir: dir, pki: newPKI(t, mkdir(t, dir, "tls"))}
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pki.pool(), MinVersion: tls.VersionTLS12}}}
	t.Cleanup(c.http.CloseIdleConnections)

	initCmd := exec.CommandContext(t.Context(), bin("agenthub"), "init", "--db", db)
	initCmd.Env = c.hubEnv(t, "init")
	var initErr bytes.Buffer
	initCmd.Stderr = &initErr
	out, err := initCmd.Output()
	if err != nil {
		t.Fatalf("agenthub init: %v\n%s", err, initErr.String())
	}
	c.token = strings.TrimSpace(string(out))

	nginxAddr := freeAddr(t, nginxIP)
	c.URL = "https://" + nginxAddr
	var ips []net.IP
	for i := range 3 {
		ip := fmt.Sprintf("127.0.0.%d", 11+i)
		ips = append(ips, net.ParseIP(ip))
		c.replicas = append(c.replicas, &replica{name: string(rune('A' + i)), addr: freeAddr(t, ip), internal: freeAddr(t, ip)})
	}
	c.db = db
	c.cert, c.key = c.pki.issue(t, "replica", []string{replicaDNS, "localhost"}, ips...)
	for _, r := range c.replicas {
		c.startReplica(t, r)
	}
	for _, r := range c.replicas {
		c.waitHealthy(t, r.URL(), r.p)
	}
	c.startNginx(t, nginxBin, nginxAddr)
	c.waitHealthy(t, c.URL, c.nginx)
	return c
}

// startReplica starts (or restarts) `agenthub serve` for r; it runs until
// the cluster's test ends.
func (c *cluster) startReplica(t testing.TB, r *replica) {
	t.Helper()
	r.p = startOwned(t, c.owner, "replica "+r.name, c.hubEnv(t, r.name), syscall.SIGTERM, bin("agenthub"), "serve",
		"--db", c.db, "--listen", r.addr, "--tls-cert", c.cert, "--tls-key", c.key,
		"--public-url", c.URL, "--internal-addr", r.internal, "--trusted-proxy", "127.0.0.1",
		"--sandboxes", "off", "--sandbox-dir", filepath.Join(c.dir, "sandboxes-"+r.name))
}

// steer makes cheap calls through nginx until the next gRPC call nginx
// passes on goes to target. nginx's round robin (one worker, equal
// weights) takes the live replicas in their order; which one took the
// last call is in the access log, written when the call ended.
func (c *cluster) steer(t testing.TB, m *machine, target *replica) {
	t.Helper()
	for range 4 {
		if c.nextGRPC(t) == target {
			return
		}
		if r := c.agentctl(t, c.URL, "--machine", m.id, "sh", "true"); r.code != 0 {
			t.Fatalf("a call through nginx: %+v", r)
		}
	}
	t.Fatalf("nginx's round robin does not reach replica %s", target.name)
}

// nextGRPC is the live replica after the one that took the last gRPC call
// (per nginx's access log).
func (c *cluster) nextGRPC(t testing.TB) *replica {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(c.dir, "nginx", "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, `"POST /agentd.`) {
			_, last, _ = strings.Cut(line, "upstream=")
		}
	}
	// A call retried on another replica lists both: the last one served it.
	if i := strings.LastIndex(last, ", "); i >= 0 {
		last = last[i+2:]
	}
	var live []*replica
	at := -1
	for _, r := range c.replicas {
		if !r.p.exited() {
			if r.addr == last {
				at = len(live)
			}
			live = append(live, r)
		}
	}
	return live[(at+1)%len(live)]
}

// nextAfter is the live replica after r in nginx's order.
func (c *cluster) nextAfter(r *replica) *replica {
	var live []*replica
	at := 0
	for _, x := range c.replicas {
		if !x.p.exited() {
			if x == r {
				at = len(live)
			}
			live = append(live, x)
		}
	}
	return live[(at+1)%len(live)]
}

// calls is each replica's agenthub_grpc_calls_total (0 for a dead one).
func (c *cluster) calls(t testing.TB) []int64 {
	t.Helper()
	n := make([]int64, len(c.replicas))
	for i, r := range c.replicas {
		if !r.p.exited() {
			n[i] = c.metric(t, r, "agenthub_grpc_calls_total")
		}
	}
	return n
}

func findNginx(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	t.Skip("skipping: no nginx binary (apt-get install nginx)")
	return ""
}

// hubEnv is the environment of an agenthub process: its own home, so
// that nothing lands in the real one.
func (c *cluster) hubEnv(t testing.TB, name string) []string {
	home := mkdir(t, c.dir, "home-"+name)
	return append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "AGENTHUB_DB=")
}

// mainConf is the nginx.conf around the deployed configuration: only what
// a test run needs (its own prefix, pid, logs and temp paths; one worker,
// so that round robin goes through the replicas in turn).
const mainConf = `%[2]s
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 1024; }
http {
    log_format upstream '$remote_addr "$request" $status $body_bytes_sent upstream=$upstream_addr';
    access_log %[1]s/access.log upstream;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/agenthub.conf;
}
`

func (c *cluster) startNginx(t testing.TB, nginxBin, addr string) {
	t.Helper()
	dir := mkdir(t, c.dir, "nginx")
	src, err := os.ReadFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := c.pki.issue(t, "nginx", []string{"localhost"}, net.ParseIP(nginxIP))
	conf, err := render(string(src),
		"listen 443 ssl http2;", "listen "+addr+" ssl http2;",
		"10.0.0.11:8443", c.replicas[0].addr,
		"10.0.0.12:8443", c.replicas[1].addr,
		"10.0.0.13:8443", c.replicas[2].addr,
		"/etc/nginx/tls/hub.example.com.pem", cert,
		"/etc/nginx/tls/hub.example.com.key", key,
		"/etc/nginx/tls/replicas-ca.pem", c.pki.CAFile,
	)
	if err != nil {
		t.Fatalf("%s: %v", confPath, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agenthub.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers reach the temp paths under the test's 0700 directory
	}
	main := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(main, fmt.Appendf(nil, mainConf, dir, user), 0o600); err != nil {
		t.Fatal(err)
	}
	c.nginx = startProc(t, "nginx", os.Environ(), syscall.SIGTERM, nginxBin, "-p", dir, "-c", main, "-e", "stderr", "-g", "daemon off;")
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "access.log"))
			t.Logf("nginx access log (last 6000 bytes):\n%s", tail(string(log), 6000))
		}
	})
}

// render replaces each old string (pairs of old, new) in the
// configuration; every one must occur, so a changed configuration fails
// the test rather than running with the documentation's addresses.
func render(conf string, oldnew ...string) (string, error) {
	for i := 0; i < len(oldnew); i += 2 {
		if !strings.Contains(conf, oldnew[i]) {
			return "", fmt.Errorf("has no %q to replace: the test and the configuration disagree", oldnew[i])
		}
	}
	return strings.NewReplacer(oldnew...).Replace(conf), nil
}

// waitHealthy polls GET url/healthz until it answers 200, p exits, or 30 s
// pass.
func (c *cluster) waitHealthy(t testing.TB, url string, p *proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = errors.New(resp.Status)
		}
		if p.exited() {
			t.Fatalf("%s exited (%v) before %s/healthz answered", p.name, p.err, url)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz: %v after 30 s", url, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// metric reads one unlabelled value from the replica's /metrics.
func (c *cluster) metric(t testing.TB, r *replica, name string) int64 {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, r.URL()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token) // the owner's
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("replica %s /metrics: %v", r.name, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("replica %s: %s %q: %v", r.name, name, v, err)
			}
			return n
		}
	}
	t.Fatalf("replica %s /metrics has no %s (%v)", r.name, name, sc.Err())
	return 0
}

// holder returns the live replica whose /metrics shows the machine's
// tunnel (the test pairs one machine), or nil.
func (c *cluster) holder(t testing.TB) *replica {
	t.Helper()
	var h *replica
	for _, r := range c.replicas {
		if r.p.exited() {
			continue
		}
		if n := c.metric(t, r, "agenthub_tunnels"); n > 0 {
			if h != nil {
				t.Fatalf("replicas %s and %s both hold tunnels", h.name, r.name)
			}
			h = r
		}
	}
	return h
}

// waitFor polls cond every 20 ms until it holds or within passes, and
// returns how long it took.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	return time.Since(start)
}

// result is how an agentctl or agentd command ended.
type result struct {
	code           int
	stdout, stderr string
}

// clientEnv is the environment of agentctl and agentd: the test CA
// trusted (SSL_CERT_FILE, which Go's TLS reads on Linux), the owner's
// token, a home of their own.
func (c *cluster) clientEnv(t testing.TB, name string) []string {
	home := mkdir(t, c.dir, "home-"+name)
	return append(os.Environ(), "SSL_CERT_FILE="+c.pki.CAFile, "AGENTD_TOKEN="+c.token, "HOME="+home,
		"AGENTD_HUB=", "AGENTD_MACHINE=", "AGENTD_ENV=", "AGENTCTL_ADDR=")
}

// run runs a command to its end.
func run(t testing.TB, env []string, bin string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return result{ee.ExitCode(), out.String(), errb.String()}
	case err != nil:
		t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return result{0, out.String(), errb.String()}
}

// agentctl runs agentctl --hub hub ARGS.
func (c *cluster) agentctl(t testing.TB, hub string, args ...string) result {
	t.Helper()
	return run(t, c.clientEnv(t, "agentctl"), bin("agentctl"), append([]string{"--hub", hub}, args...)...)
}

// freeAddr returns ip:port with a port that was free a moment ago.
func freeAddr(t testing.TB, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	defer l.Close()
	return l.Addr().String()
}

func mkdir(t testing.TB, parent, name string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}
