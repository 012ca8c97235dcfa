package hub_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/broker"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/orgca"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// The test's network namespace: the host's end of the veth holds
// brokerHost; the namespace holds brokerUp (the upstream, which the hub is
// allowed to reach by an explicit private rule) and brokerOther (private
// too, not allowed).
const (
	brokerNS    = "agentd-brk"
	brokerVethH = "agentd-brkh"
	brokerVethN = "agentd-brkn"
)

var (
	brokerHost  = netip.MustParsePrefix("10.251.90.1/24")
	brokerUp    = netip.MustParsePrefix("10.251.90.2/24")
	brokerOther = netip.MustParsePrefix("10.251.90.3/24")
)

// brokerNetns makes the namespace and its veth, checks the host routes
// its addresses to the veth, and returns a listener on brokerUp and one
// on brokerOther made inside it.
func brokerNetns(t *testing.T) (up, other net.Listener) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns")
	}
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	del := func() {
		_ = exec.Command("ip", "netns", "del", brokerNS).Run()
		_ = exec.Command("ip", "link", "del", brokerVethH).Run()
	}
	del()
	t.Cleanup(del)
	sh("netns", "add", brokerNS)
	sh("link", "add", brokerVethH, "type", "veth", "peer", "name", brokerVethN, "netns", brokerNS)
	sh("addr", "add", brokerHost.String(), "dev", brokerVethH)
	sh("link", "set", brokerVethH, "up")
	sh("-n", brokerNS, "addr", "add", brokerUp.String(), "dev", brokerVethN)
	sh("-n", brokerNS, "addr", "add", brokerOther.String(), "dev", brokerVethN)
	sh("-n", brokerNS, "link", "set", brokerVethN, "up")
	for _, p := range []netip.Prefix{brokerUp, brokerOther} {
		out, err := exec.Command("ip", "-o", "route", "get", p.Addr().String()).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "dev "+brokerVethH+" ") {
			t.Fatalf("the host does not route %s to %s, refusing to send traffic there: %s", p.Addr(), brokerVethH, out)
		}
	}
	listen := func(a netip.Addr) net.Listener {
		type res struct {
			ln  net.Listener
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread()
			orig, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				ch <- res{err: err}
				return
			}
			defer orig.Close()
			target, err := os.Open(filepath.Join("/run/netns", brokerNS))
			if err != nil {
				ch <- res{err: err}
				return
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- res{err: err}
				return
			}
			ln, err := net.Listen("tcp4", netip.AddrPortFrom(a, 443).String())
			if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			ch <- res{ln, err}
		}()
		r := <-ch
		if r.err != nil {
			t.Fatalf("listen in %s: %v", brokerNS, r.err)
		}
		t.Cleanup(func() { r.ln.Close() })
		return r.ln
	}
	return listen(brokerUp.Addr()), listen(brokerOther.Addr())
}

const brokerProfile = `{"name": %q, "slug": %q, "display_name": "Broker fixture", "executable": "sh", "strategy": "builder",
  "install": {"script": ["true"]}, "limits": {"cpus": 0.5, "memory_mib": 256, "pids": 128},
  "network": {"default": "allow", "allow": ["tunnel.example.com"]}, "ttl": "1h", "sensitivity": "low",
  "brokered": [{"env": "OPENAI_API_KEY", "host": "upstream.example.com", "header": "X-Api-Key", "format": "key={secret}"}],
  "risk_notes": ["A test fixture."]}`

// A credential brokered at the hub's egress proxy never enters the
// sandbox: a real agent run's curl and python reach an upstream TLS server
// in a network namespace the test made (reached through an explicit
// private-address rule, with its own test CA that the hub trusts), and the
// upstream receives exactly the rule's header, in place of what the
// client sent; the secret is then in no process's environ in the
// container, in no file of it (its exported root, and every mount read
// from inside), not in its configuration, the org's activity or the hub's
// logs. A host without a rule is a plain tunnel (the client sees the
// upstream's own certificate); another private address stays refused;
// bad rules are refused before any sandbox starts.
func TestAgentRunBrokeredSecret(t *testing.T) {
	base := sandboxtest.BaseImage(t)
	upLn, otherLn := brokerNetns(t)
	runner := "agentd/runner-managed:brokerfixture-latest"
	if out, err := exec.Command("docker", "tag", base, runner).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })

	// The upstream: its own test CA, one certificate for both names.
	cp, kp, err := orgca.Generate("test public CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	public, err := orgca.Parse(cp, kp, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := public.Leaf("upstream.example.com")
	if err != nil {
		t.Fatal(err)
	}
	tunnelLeaf, err := public.Leaf("tunnel.example.com")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string // "host auth apikey" per request
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %q %q", r.Host, r.Header.Values("Authorization"), r.Header.Values("X-Api-Key")))
		mu.Unlock()
		fmt.Fprintf(w, "upstream got %s\n", r.URL.Path) // never the header
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{*leaf, *tunnelLeaf}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(upLn, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	go func() {
		for {
			c, err := otherLn.Accept()
			if err != nil {
				return
			}
			t.Errorf("the private address %s that no rule allows was reached", brokerOther.Addr())
			c.Close()
		}
	}()

	value := fmt.Sprintf("sk-brokered-%d", time.Now().UnixNano())
	value2 := fmt.Sprintf("sk-profile-%d", time.Now().UnixNano())
	secretDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secretDir, "team"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"openai": value, "other": value2} {
		if err := os.WriteFile(filepath.Join(secretDir, "team", name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The hub's dialer as agenthub serve --egress-allow-private 10.251.90.2
	// makes it; the names resolve to the namespace's addresses.
	allowPrivate, err := egressproxy.ParsePrivateAllow([]string{brokerUp.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]netip.Addr{"upstream.example.com": brokerUp.Addr(), "tunnel.example.com": brokerUp.Addr(), "other.example.com": brokerOther.Addr()}
	dialer := &egressproxy.PublicDialer{AllowPrivate: allowPrivate, Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return []netip.Addr{a}, nil
		}
		return nil, fmt.Errorf("the test knows no host %s", host) // never a real lookup
	}}
	roots := x509Pool(public)
	var logs syncBuffer
	logger := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(),
		zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&logs), zap.DebugLevel))).Named("hub")
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.EgressDial = dialer.Dial
		o.EgressRoots = roots
		o.Agents = []agentimage.Profile{agentProfile(t, "brokerfixture", brokerProfile)}
	}, hubtest.Options{Secrets: hub.DirSecrets{Dir: secretDir}, Logger: logger})
	run := h.agentctl()

	// Bad rules: refused before any sandbox starts.
	before, _ := h.Store.ListSandboxes(t.Context(), "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--secret-header", "upstream.example.com:Authorization=Bearer " + value}, "one ref:PATH"},
		{[]string{"--secret-header", "upstream.example.com:Authorization=Bearer ref:team/nope"}, "no such secret"},
		{[]string{"--secret-header", "10.251.90.2:Authorization=ref:team/openai"}, "not an IP address"},
		{[]string{"--secret-header", "upstream.example.com:Authorization=ref:team/openai", "--network", "open"}, "needs the hub's egress proxy"},
	} {
		code, out, errs := run(append([]string{"agent", "run", "brokerfixture"}, tc.args...)...)
		if code != 1 || out != "" || !strings.Contains(errs, tc.want) || strings.Contains(errs, value) {
			t.Errorf("agent run %v = %d %q %q; want 1 and %q", tc.args, code, out, errs, tc.want)
		}
	}
	if after, _ := h.Store.ListSandboxes(t.Context(), ""); len(after) != len(before) {
		t.Errorf("refused runs left sandboxes: %d before, %d after", len(before), len(after))
	}

	code, out, errs := run("agent", "run", "brokerfixture", "--ttl", "10m",
		"--secret-header", "upstream.example.com:Authorization=Bearer ref:team/openai",
		"--secret", "OPENAI_API_KEY=ref:team/other",
		"--allow", "other.example.com")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "sb-") {
		t.Fatalf("agent run = %d %q %q", code, out, errs)
	}
	if strings.Contains(errs, "warning:") {
		t.Errorf("a run whose secrets are all brokered warns: %q", errs)
	}
	sh := func(script string) (int, string, string) { return run("--machine", id, "sh", script) }

	// What the sandbox sees: the bundle and its variables, a placeholder.
	code, out, _ = sh(`echo "$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE $GIT_SSL_CAINFO"; echo "$OPENAI_API_KEY"; touch /run/agentd-ca/x 2>/dev/null && echo writable; true`)
	b := sandboxes.CABundleFile
	if lines := strings.Split(out, "\n"); code != 0 || len(lines) < 2 || lines[0] != strings.Repeat(b+" ", 4)+b ||
		!strings.HasPrefix(lines[1], broker.PlaceholderPrefix) || strings.Contains(out, "writable") {
		t.Errorf("the sandbox's trust variables and placeholder: %d %q", code, out)
	}

	// curl (whatever Authorization it sends) and python: the upstream gets
	// exactly the rules' headers.
	for _, script := range []string{
		`curl -sS -H 'Authorization: Bearer agentd-fake' -H "X-Api-Key: $OPENAI_API_KEY" https://upstream.example.com/v1/curl`,
		`python3 -c 'import urllib.request as u; print(u.urlopen("https://upstream.example.com/v1/python").read().decode(), end="")'`,
	} {
		if code, out, errs := sh(script); code != 0 || !strings.HasPrefix(out, "upstream got /v1/") {
			t.Errorf("%s = %d %q %q", script, code, out, errs)
		}
	}
	mu.Lock()
	want := fmt.Sprintf("upstream.example.com [%q] [%q]", "Bearer "+value, "key="+value2)
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("the upstream received %q; want twice %q", got, want)
	}
	got = nil
	mu.Unlock()

	// Certificates: the brokered host's is the org CA's (the bundle
	// verifies it), the tunnelled host's is its own (the upstream's leaf).
	fp := func(der []byte) string { s := sha256.Sum256(der); return hex.EncodeToString(s[:]) }
	pyCert := `import http.client, ssl, hashlib, sys
host, verify = sys.argv[1], sys.argv[2] == "1"
ctx = ssl.create_default_context() if verify else ssl._create_unverified_context()
c = http.client.HTTPSConnection("127.0.0.1", 3128, context=ctx)
c.set_tunnel(host, 443)
c.request("GET", "/cert")
c.getresponse().read()
print(hashlib.sha256(c.sock.getpeercert(True)).hexdigest())`
	if code, out, errs := run("--machine", id, "exec", "--", "python3", "-c", pyCert, "upstream.example.com", "1"); code != 0 ||
		strings.TrimSpace(out) == fp(leaf.Certificate[0]) {
		t.Errorf("brokered host, verified with the sandbox's bundle: %d %q %q; want a certificate of the org's CA", code, out, errs)
	}
	if code, out, errs := run("--machine", id, "exec", "--", "python3", "-c", pyCert, "tunnel.example.com", "0"); code != 0 ||
		strings.TrimSpace(out) != fp(tunnelLeaf.Certificate[0]) {
		t.Errorf("tunnelled host: %d %q %q; want the upstream's own certificate %s", code, out, errs, fp(tunnelLeaf.Certificate[0]))
	}
	mu.Lock()
	if len(got) != 2 || got[1] != `tunnel.example.com [] []` {
		t.Errorf("the tunnelled request arrived as %q; want no header added", got)
	}
	mu.Unlock()
	// Another private address: refused (no rule allows it).
	if code, out, _ := sh(`curl -sS -k -w '%{http_connect}' -o /dev/null https://other.example.com/; echo " exit=$?"`); code != 0 || out != "403 exit=56\n" {
		t.Errorf("a private address no rule allows: %d %q", code, out)
	}

	// The value never entered: no process's environ, no file, not the
	// container's configuration.
	sb, err := h.Store.Sandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	environ, err := exec.Command("docker", "exec", "-u", "0", sb.ContainerID, "sh", "-c", "cat /proc/[0-9]*/environ | tr '\\0' '\\n'").Output()
	if err != nil || !bytes.Contains(environ, []byte("OPENAI_API_KEY="+broker.PlaceholderPrefix)) {
		t.Errorf("read the container's environs: %v (%d bytes, placeholder present: %v)", err, len(environ), bytes.Contains(environ, []byte(broker.PlaceholderPrefix)))
	}
	inspect, _ := exec.Command("docker", "inspect", sb.ContainerID).Output()
	export, err := exec.Command("docker", "export", sb.ContainerID).Output()
	if err != nil || len(export) < 1<<20 {
		t.Errorf("docker export: %v (%d bytes)", err, len(export))
	}
	// Every mount too (the workspace, the tmpfs, the bundle), read from
	// inside.
	mounts, err := exec.Command("docker", "exec", "-u", "0", sb.ContainerID, "tar", "-C", "/", "-cf", "-",
		"--exclude=./proc", "--exclude=./sys", "--exclude=./dev", ".").Output()
	if err != nil && len(mounts) < 1<<20 {
		t.Errorf("tar of the container's files: %v (%d bytes)", err, len(mounts))
	}
	if !bytes.Contains(mounts, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("the tar of the container's files lacks the trust bundle: is it complete?")
	}
	for what, b := range map[string][]byte{"environ": environ, "docker inspect": inspect, "docker export": export, "files": mounts} {
		for _, v := range []string{value, value2} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("the secret is in the container's %s", what)
			}
		}
	}

	// Nor in activity or the hub's logs; the run's record says what is
	// brokered.
	recs, err := h.Store.ListActivity(t.Context(), store.ActivityQuery{OrgID: h.Org.ID, Limit: store.MaxActivityLimit})
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, a := range recs {
		all.Write(a.Record)
	}
	for _, v := range []string{value, value2} {
		if bytes.Contains(all.Bytes(), []byte(v)) {
			t.Errorf("the secret is in the org's activity")
		}
		if bytes.Contains([]byte(logs.String()), []byte(v)) {
			t.Errorf("the secret is in the hub's logs")
		}
	}
	for _, want := range []string{
		"brokered Authorization for upstream.example.com:443, X-Api-Key for upstream.example.com:443",
		"egress to upstream.example.com:443 from " + id + " (brokered: the hub set Authorization, X-Api-Key)",
		"egress to tunnel.example.com:443 from " + id + `"`,
	} {
		if !bytes.Contains(all.Bytes(), []byte(want)) {
			t.Errorf("the org's activity lacks %q", want)
		}
	}

	// A hub restart: the rules come back from the container's label, their
	// references resolved again.
	h.Stop()
	h.Serve(h.Addr)
	pollUntil(t, 30*time.Second, "the sandbox back on the restarted hub", func() (bool, string) {
		code, out, errs := sh("true")
		return code == 0, out + errs
	})
	if code, out, errs := sh(`curl -sS https://upstream.example.com/v1/again`); code != 0 || out != "upstream got /v1/again\n" {
		t.Errorf("after a hub restart: %d %q %q", code, out, errs)
	}
	mu.Lock()
	if want := fmt.Sprintf("upstream.example.com [%q] [%q]", "Bearer "+value, "key="+value2); len(got) == 0 || got[len(got)-1] != want {
		t.Errorf("after a hub restart the upstream received %q; want last %q", got, want)
	}
	mu.Unlock()
	if bytes.Contains([]byte(logs.String()), []byte(value)) {
		t.Errorf("the secret is in the hub's logs after the restart")
	}

	// A secret handed in as a value still works, and agent run warns.
	code, out, errs = run("agent", "run", "brokerfixture", "--secret", "OTHER_KEY=ref:team/other", "--", "-c", `test "$OTHER_KEY" = "`+value2+`" && echo ok`)
	if code != 0 || out != "ok\n" || strings.Count(errs, "agentctl: warning: OTHER_KEY enters the sandbox") != 1 {
		t.Errorf("a secret as a value: %d %q %q; want ok and one warning", code, out, errs)
	}
}

func x509Pool(cas ...*orgca.CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Certificate())
	}
	return p
}
