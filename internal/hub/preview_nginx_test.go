package hub_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/testca"
)

// docBlock is the fenced block of docs/deploy.md whose first line is
// first (fence and list indentation removed), so that a test runs what
// the page shows.
func docBlock(t *testing.T, fence, first string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```"+fence || strings.TrimSpace(lines[i+1]) != first {
			continue
		}
		indent := lines[i][:strings.Index(lines[i], "```")]
		var b strings.Builder
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "```" {
				return b.String()
			}
			b.WriteString(strings.TrimPrefix(l, indent) + "\n")
		}
	}
	t.Fatalf("docs/deploy.md has no ```%s block starting %q", fence, first)
	return ""
}

// replaceAll replaces each old (pairs of old, new) in s; each must occur,
// so that a changed page fails the test rather than running unreplaced.
func replaceAll(t *testing.T, what, s string, oldnew ...string) string {
	t.Helper()
	for i := 0; i < len(oldnew); i += 2 {
		if !strings.Contains(s, oldnew[i]) {
			t.Fatalf("%s has no %q: the test and the page disagree", what, oldnew[i])
		}
	}
	return strings.NewReplacer(oldnew...).Replace(s)
}

// nginxMain is the nginx.conf around the page's block: the test's own
// prefix, pid, logs and temp paths; the $connection_upgrade map of
// docs/nginx/agenthub.conf (the block refers to it); a server block for
// the hub's own name (the console, where the sign-in hop goes); the
// page's block.
const nginxMain = `%[1]s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log stderr notice;
events { worker_connections 256; }
http {
    access_log %[2]s/access.log;
    client_body_temp_path %[2]s/client_body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
%[3]s
    server {
        listen %[4]s ssl;
        server_name hub.test;
        ssl_certificate     %[2]s/tls.pem;
        ssl_certificate_key %[2]s/tls.key;
        location / {
            proxy_pass http://%[5]s;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
    }
    include %[2]s/preview.conf;
}
`

// startPreviewNginx runs nginx on listen with docs/deploy.md's preview
// block in front of the hub at hubAddr, TLS with certPEM and keyPEM (for
// *.preview.test and hub.test); it stops when the test ends. It skips the
// test when nginx is not installed.
func startPreviewNginx(t *testing.T, listen, hubAddr string, certPEM, keyPEM []byte) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("skipping: no nginx (apt-get install nginx)")
		}
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tls.pem": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	block := replaceAll(t, "docs/deploy.md's preview block", docBlock(t, "conf", "# nginx: an http{}-level server block beside the hub's"),
		"listen 443 ssl;", "listen "+listen+" ssl;",
		"server_name *.preview.example.com;", "server_name *.preview.test;",
		"/etc/nginx/tls/wildcard.preview.example.com.pem", filepath.Join(dir, "tls.pem"),
		"/etc/nginx/tls/wildcard.preview.example.com.key", filepath.Join(dir, "tls.key"),
		"proxy_pass http://127.0.0.1:8080;", "proxy_pass http://"+hubAddr+";")
	full, err := os.ReadFile("../../docs/nginx/agenthub.conf")
	if err != nil {
		t.Fatal(err)
	}
	_, upgrade, _ := strings.Cut(string(full), "\nmap $http_upgrade $connection_upgrade {")
	upgrade, _, ok := strings.Cut(upgrade, "\n}\n")
	if !ok {
		t.Fatal("docs/nginx/agenthub.conf has no map $http_upgrade $connection_upgrade")
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers reach the temp paths under the test's 0700 directory
	}
	if err := os.WriteFile(filepath.Join(dir, "preview.conf"), []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "nginx.conf")
	conf := fmt.Sprintf(nginxMain, user, dir, "map $http_upgrade $connection_upgrade {"+upgrade+"\n}", listen, hubAddr)
	if err := os.WriteFile(main, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer // written by the process until Wait returns
	cmd := exec.Command(bin, "-p", dir, "-c", main, "-e", "stderr", "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("nginx did not stop within 10 s of SIGTERM; killed")
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			access, _ := os.ReadFile(filepath.Join(dir, "access.log"))
			t.Logf("nginx's output:\n%s\naccess log:\n%s", log.String(), access)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-done:
			t.Fatalf("nginx exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx never listened on %s: %v", listen, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// docs/deploy.md's nginx server block for --preview-domain, as the page
// shows it, in front of a hub on loopback started as the page says
// (--public-url https://…, --trusted-proxy 127.0.0.1), with a wildcard
// certificate of the test CA: a client checking the certificate against
// the CA reaches a preview, the app sees the client's address (from
// 127.0.0.5) and https in X-Forwarded-*, an unknown token is the preview
// server's 404; in Chromium (its resolver sends *.preview.test and
// hub.test to nginx, and it accepts the certificate by its key's hash) a
// public page of python3 -m http.server on a paired machine, then, signed
// in to the console through nginx, the WebSocket echo through a private
// URL over wss; the preview's sign-in cookie and the console's session
// cookie are Secure.
func TestPreviewDomainBehindNginx(t *testing.T) {
	ca := testca.New(t)
	certPEM, keyPEM, der := ca.Issue(t, "*.preview.test", "hub.test")
	nport := freePort(t)
	listen := fmt.Sprintf("127.0.0.1:%d", nport)
	hb := hubtest.Start(t, hubtest.Options{PreviewDomain: "preview.test",
		PreviewDomainURL: fmt.Sprintf("https://preview.test:%d", nport), PublicURL: fmt.Sprintf("https://hub.test:%d", nport),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	startPreviewNginx(t, listen, h.addr, certPEM, keyPEM)
	m := h.startMachine(h.owner)

	// A client that checks the certificate, from 127.0.0.5.
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5)}}
			return d.DialContext(ctx, network, listen)
		}}}
	defer c.CloseIdleConnections()
	fetch := func(u string) (int, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s through nginx: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	app := appServer(t)
	code, out, errs := h.agentctl(h.owner, m.id, "port", "expose", fmt.Sprint(app), "--access", "public")
	public := strings.TrimSpace(out)
	host := strings.TrimSuffix(strings.TrimPrefix(public, "https://"), "/")
	if code != 0 || !strings.HasPrefix(public, "https://") || !strings.HasSuffix(host, fmt.Sprintf(".preview.test:%d", nport)) {
		t.Fatalf("expose: exit %d %q %s; want https://TOKEN.preview.test:%d/", code, out, errs, nport)
	}
	st, body := fetch(public + "echo")
	var seen map[string]string
	if st != 200 || json.Unmarshal([]byte(body), &seen) != nil {
		t.Fatalf("GET %secho through nginx: %d %s", public, st, body)
	}
	if seen["host"] != fmt.Sprintf("127.0.0.1:%d", app) || seen["xff"] != "127.0.0.5" || seen["xfp"] != "https" || seen["xfh"] != host || seen["path"] != "/echo" {
		t.Errorf("the app behind nginx saw %v; want host 127.0.0.1:%d, X-Forwarded-For 127.0.0.5, X-Forwarded-Proto https, X-Forwarded-Host %s", seen, app, host)
	}
	if st, body := fetch(public + "sse"); st != 200 || body != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
		t.Errorf("SSE through nginx: %d %q", st, body)
	}
	if st, body := fetch(fmt.Sprintf("https://%s.preview.test:%d/", strings.Repeat("a", 52), nport)); st != 404 || !strings.Contains(body, "No such preview") {
		t.Errorf("an unknown token through nginx: %d %q; want the preview server's 404", st, body)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	hubURL := fmt.Sprintf("https://hub.test:%d", nport)
	a := previewApps{ctl: hubCtl(t, h.url, h.owner, "--machine", m.id), site: freePort(t), echo: freePort(t)}
	a.start(t)
	cr := newChromium(t, hubURL, screenshotDir(t),
		chromedp.Flag("host-resolver-rules", "MAP *.preview.test 127.0.0.1, MAP hub.test 127.0.0.1"),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])))
	private := a.browse(t, cr, hubURL, h.owner, "https", "preview-nginx")
	var grant bool
	for _, ck := range cookiesOf(t, cr, private) {
		if strings.HasSuffix(ck.Name, "agentd_preview") {
			grant = true
			if ck.Name != "__Host-agentd_preview" || !ck.Secure || !ck.HTTPOnly {
				t.Errorf("the preview's sign-in cookie over https: %s secure=%v httpOnly=%v; want __Host-agentd_preview, Secure, HttpOnly", ck.Name, ck.Secure, ck.HTTPOnly)
			}
		}
	}
	if !grant {
		t.Errorf("no sign-in cookie for %s", private)
	}
	// The console's session cookie, set through nginx, is Secure too: the
	// browser never sends it over plain HTTP.
	var session bool
	for _, ck := range cookiesOf(t, cr, hubURL+"/console/") {
		if strings.HasSuffix(ck.Name, "agenthub_console") {
			session = true
			if ck.Name != "__Host-agenthub_console" || !ck.Secure || !ck.HTTPOnly {
				t.Errorf("the console's session cookie behind nginx: %s secure=%v httpOnly=%v; want __Host-agenthub_console, Secure, HttpOnly", ck.Name, ck.Secure, ck.HTTPOnly)
			}
		}
	}
	if !session {
		t.Errorf("no console session cookie for %s", hubURL)
	}
}
