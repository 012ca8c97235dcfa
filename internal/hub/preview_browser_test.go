package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// The browser tests of issue 22: a page of python3 -m http.server and a
// WebSocket echo (testdata/wsecho, a static binary the test builds and
// writes to the target with agentctl write) run on a paired machine or
// in a builtin sandbox, started with agentctl exec --detach as an agent
// would; Chromium opens the page through a public preview URL without
// signing in, then, signed in to the console, the echo's page through a
// private URL (the preview domain's sign-in hop), whose script's
// WebSocket round trip it reads from the page.

// previewApps is a target's two servers: python3 -m http.server on
// site, and wsecho.
type previewApps struct {
	ctl        func(stdin io.Reader, args ...string) (int, string, string) // agentctl aimed at the target
	site, echo int                                                         // their ports on the target
}

// hubCtl is agentctl run in-process against hubURL with token, aimed by
// target (--machine ID, or --env E --conversation C); stdin may be nil.
func hubCtl(t *testing.T, hubURL, token string, target ...string) func(stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(stdin io.Reader, args ...string) (int, string, string) {
		if stdin == nil {
			stdin = strings.NewReader("")
		}
		var out, errb bytes.Buffer
		code := ctl.Main(t.Context(), append(append([]string{"--hub", hubURL, "--token-file", tf}, target...), args...),
			ctl.IO{In: stdin, Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
}

// wsechoBinary builds testdata/wsecho, static, and returns its bytes.
func wsechoBinary(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wsecho")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-ldflags", "-s -w", "-o", bin, "./testdata/wsecho")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/wsecho: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sitePage is python3 -m http.server's index.html: its script says
// that it ran.
const sitePage = `<!doctype html><html><head><meta charset="utf-8"><title>site</title></head><body>
<p id="out">static</p>
<script>document.getElementById("out").textContent = "result: hello from http.server, script ran over " + location.protocol;</script>
</body></html>
`

// start writes the site and wsecho to the target's workspace, starts
// both servers detached, and waits until port ls lists their ports.
func (a previewApps) start(t *testing.T) {
	t.Helper()
	must := func(stdin io.Reader, args ...string) string {
		t.Helper()
		code, out, errs := a.ctl(stdin, args...)
		if code != 0 {
			t.Fatalf("agentctl %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	must(strings.NewReader(sitePage), "write", "site/index.html", "-p")
	must(bytes.NewReader(wsechoBinary(t)), "write", "bin/wsecho", "-p", "--mode", "0755")
	must(nil, "exec", "--detach", "--", "python3", "-m", "http.server", fmt.Sprint(a.site), "--bind", "127.0.0.1", "--directory", "site")
	must(nil, "exec", "--detach", "--", "bin/wsecho", "-listen", fmt.Sprintf("127.0.0.1:%d", a.echo))
	for deadline := time.Now().Add(60 * time.Second); ; {
		var resp struct{ Ports []struct{ Port int } }
		if err := json.Unmarshal([]byte(must(nil, "--json", "port", "ls")), &resp); err != nil {
			t.Fatal(err)
		}
		up := 0
		for _, p := range resp.Ports {
			if p.Port == a.site || p.Port == a.echo {
				up++
			}
		}
		if up >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port ls never listed %d and %d: %+v", a.site, a.echo, resp.Ports)
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
}

// expose exposes port with access and returns the URL printed.
func (a previewApps) expose(t *testing.T, port int, access, wantPrefix string) string {
	t.Helper()
	code, out, errs := a.ctl(nil, "port", "expose", fmt.Sprint(port), "--access", access)
	u := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(u, wantPrefix) || !strings.HasSuffix(u, ".preview.test"+u[strings.LastIndex(u, ":"):]) {
		t.Fatalf("port expose %d --access %s: exit %d %q %s; want a URL under %s…preview.test", port, access, code, out, errs, wantPrefix)
	}
	return u
}

// browse opens the site through a public URL in cr before signing in,
// then signs in to the console at consoleURL with token and opens the
// echo's page through a private URL: the WebSocket echoes both messages.
// scheme is the previews' ("http" or "https"). It returns the private
// URL.
func (a previewApps) browse(t *testing.T, cr *chromium, consoleURL, token, scheme, shot string) string {
	t.Helper()
	public := a.expose(t, a.site, "public", scheme+"://")
	cr.run("the public preview of python3 -m http.server, not signed in",
		chromedp.Navigate(public), cr.contains("#out", "result: "), cr.shot(shot+"-public"))
	if got := pageText(t, cr, "#out"); got != "result: hello from http.server, script ran over "+scheme+":" {
		t.Errorf("the public preview's page: %q", got)
	}

	private := a.expose(t, a.echo, "private", scheme+"://")
	cr.run("console sign-in", chromedp.Navigate(consoleURL+"/console/"))
	cr.signIn(token)
	cr.run("the private preview of the WebSocket echo, signed in",
		chromedp.Navigate(private), cr.contains("#out", "result: "), cr.shot(shot+"-private-ws"))
	ws := map[string]string{"http": "ws:", "https": "wss:"}[scheme]
	if got, want := pageText(t, cr, "#out"), "result: echoed 2 messages, the last 300006 bytes, over "+ws; got != want {
		t.Errorf("the echo's page through the private URL: %q; want %q", got, want)
	}
	if loc, err := chromedp.Run(cr.ctx, chromedp.Location()); err != nil || loc != private {
		t.Errorf("after the sign-in hop the browser is at %q (%v), want %s", loc, err, private)
	}
	return private
}

// pageText is the text of the element sel on cr's page.
func pageText(t *testing.T, cr *chromium, sel string) string {
	t.Helper()
	s, err := chromedp.Run(cr.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cookiesOf are the browser's cookies for u.
func cookiesOf(t *testing.T, cr *chromium, u string) []*network.Cookie {
	t.Helper()
	var cs []*network.Cookie
	cr.run("cookies of "+u, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
		cs = r.Cookies
		return err
	}))
	return cs
}

// freePort is a TCP port nothing listens on at 127.0.0.1 just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A paired machine's python3 -m http.server page through a public URL,
// and its WebSocket echo through a private one after signing in, in
// Chromium, under the preview domain.
func TestPreviewMachineInChromium(t *testing.T) {
	h := startDomainHub(t)
	m := h.startMachine(h.owner)
	a := previewApps{ctl: hubCtl(t, h.url, h.owner, "--machine", m.id), site: freePort(t), echo: freePort(t)}
	a.start(t)
	cr := newChromium(t, h.url, screenshotDir(t), chromedp.Flag("host-resolver-rules", "MAP *.preview.test 127.0.0.1"))
	private := a.browse(t, cr, h.url, h.owner, "http", "preview-machine")

	// Only the preview's own origin is made the app's: a page of another
	// site still meets the app's own Origin check (wsecho's library
	// refuses it).
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for origin, ok := range map[string]bool{"http://evil.example": false, strings.TrimSuffix(private, "/"): true} {
		c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(private, "http")+"ws", &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + h.owner}, "Origin": {origin}},
			HTTPClient: &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, h.addr) // *.preview.test is the hub
			}}},
		})
		if err == nil {
			c.CloseNow()
		}
		if (err == nil) != ok || (!ok && (resp == nil || resp.StatusCode != http.StatusForbidden)) {
			t.Errorf("a WebSocket with Origin %s: %v; want accepted %v (else the app's 403)", origin, err, ok)
		}
	}
}

// The same from builtin sandboxes: network none (no interface but
// loopback: the previews reach its servers through agentd's tunnel on the
// hub's socket), under runc and gVisor, and network public (an internal
// Docker network the test makes, no route out; the egress guard is
// sandbox_egress_e2e_test's fake, since installing the hub's real
// nftables rules would change the host's firewall under the other tests,
// and they have their own test).
func TestPreviewSandboxInChromium(t *testing.T) {
	for _, tc := range []struct{ network, iso string }{
		{"none", sandbox.IsolationRunc}, {"none", sandbox.IsolationGVisor}, {"public", sandbox.IsolationRunc},
	} {
		t.Run(tc.network+"-"+tc.iso, func(t *testing.T) {
			sandboxtest.RequireIsolation(t, tc.iso)
			tune := func(*sandboxes.Options) {}
			if tc.network == "public" {
				network := testNetwork(t)
				tune = func(o *sandboxes.Options) {
					o.PublicNetwork, o.BuiltinNetwork, o.Egress = network, "public", &fakeGuard{ticks: make(chan struct{}, 1)}
				}
			}
			h := startSandboxHubWith(t, tune, hubtest.Options{PreviewDomain: "preview.test"})
			a := previewApps{ctl: hubCtl(t, h.URL, h.Token, "--env", "builtin", "--conversation", "browser"), site: 8000, echo: 8001}
			if code, out, errs := a.ctl(nil, "env", "set", "builtin", "--isolation", tc.iso); code != 0 {
				t.Fatalf("env set builtin --isolation %s: exit %d %q %s", tc.iso, code, out, errs)
			}
			want := map[string]string{"none": "lo\n", "public": "eth0 lo\n"}[tc.network]
			if code, out, errs := a.ctl(nil, "exec", "--", "python3", "-c", `import socket; print(*sorted(n for _, n in socket.if_nameindex()))`); code != 0 || out != want {
				t.Fatalf("the sandbox's network interfaces: exit %d %q %s; want %q (network %s)", code, out, errs, want, tc.network)
			}
			a.start(t)
			cr := newChromium(t, h.URL, screenshotDir(t), chromedp.Flag("host-resolver-rules", "MAP *.preview.test 127.0.0.1"))
			a.browse(t, cr, h.URL, h.Token, "http", "preview-sandbox-"+tc.network+"-"+tc.iso)
		})
	}
}

// testNetwork makes an internal Docker network (no route out), labelled
// as the test's, and removes it by id when the test ends.
func testNetwork(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("agentd-test-preview-%d", time.Now().UnixNano())
	out, err := exec.Command("docker", "network", "create", "--internal", "--label", "agentd-test=preview-browser", name).CombinedOutput()
	if err != nil {
		t.Fatalf("docker network create: %v: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "network", "rm", id).CombinedOutput(); err != nil {
			t.Errorf("docker network rm %s: %v: %s", id, err, out)
		}
	})
	return name
}
