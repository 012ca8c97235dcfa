package hub_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/storetest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// browser is a console user: a cookie jar and the hub's URL. Its POSTs
// carry the headers a browser sends for a same-origin form.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{t: t, base: base, c: c}
}

// page is a response, read.
type page struct {
	code   int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{code: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post sends a form as a same-origin browser would (extra headers: a
// forged one).
func (b *browser) post(path string, form url.Values, header ...string) page {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

func (b *browser) signIn(token string) {
	b.t.Helper()
	p := b.post("/console/signin", url.Values{"token": {token}})
	if p.code != http.StatusSeeOther || p.header.Get("Location") != "/console/machines" {
		b.t.Fatalf("sign in: %d %s\n%s", p.code, p.header.Get("Location"), p.body)
	}
}

// signedOut reports whether a console page sends b to sign in.
func (b *browser) signedOut() bool {
	b.t.Helper()
	p := b.get("/console/machines")
	return p.code == http.StatusSeeOther && p.header.Get("Location") == "/console/signin"
}

// checkPage fails unless p is a console page under the strict CSP with no
// inline script, style or event handler.
func checkPage(t *testing.T, what string, p page) {
	t.Helper()
	if got := p.header.Get("Content-Security-Policy"); got != console.CSP || !strings.Contains(got, "script-src 'self'") {
		t.Errorf("%s: Content-Security-Policy %q", what, got)
	}
	doc, err := html.Parse(strings.NewReader(p.body))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attrs := map[string]string{}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
				if strings.HasPrefix(a.Key, "on") || a.Key == "style" || strings.HasPrefix(strings.TrimSpace(a.Val), "javascript:") {
					t.Errorf("%s: inline %s=%q on <%s>", what, a.Key, a.Val, n.Data)
				}
			}
			switch {
			case n.Data == "script" && (attrs["src"] == "" || n.FirstChild != nil):
				t.Errorf("%s: inline <script>", what)
			case n.Data == "style":
				t.Errorf("%s: inline <style>", what)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
}

func TestConsolePagesAndCSP(t *testing.T) {
	h := startHub(t)
	b := newBrowser(t, h.url)
	if !b.signedOut() {
		t.Fatal("a console page was served without a session")
	}
	checkPage(t, "sign-in", b.get("/console/signin"))
	b.signIn(h.owner)
	for _, path := range []string{"/console/machines", "/console/activity", "/console/environments", "/console/tokens"} {
		p := b.get(path)
		if p.code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, p.code, p.body)
		}
		checkPage(t, path, p)
	}
	p := b.post("/console/pair", nil)
	if p.code != http.StatusOK || !strings.Contains(p.body, "agentd pair --hub "+h.url+" --code ") {
		t.Fatalf("pair: %d\n%s", p.code, p.body)
	}
	checkPage(t, "pair", p)
	for _, path := range []string{"/console/static/console.css", "/console/static/console.js"} {
		if p := b.get(path); p.code != http.StatusOK || p.header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d", path, p.code)
		}
	}
}

func TestConsoleSignInRefusals(t *testing.T) {
	h := startHub(t)
	secret, hash := store.NewToken()
	tok, err := h.store.CreateToken(t.Context(), store.Token{OrgID: h.hub.Org.ID, Name: "gone", Role: store.RoleAdmin, Hash: hash, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.RevokeToken(t.Context(), h.hub.Org.ID, tok.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, token, want string }{
		{"empty", "", "no API token"},
		{"malformed", "hunter2", "not an agenthub API token"},
		{"unknown", "agt_" + strings.Repeat("A", 43), "unknown API token"},
		{"revoked", secret, "revoked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBrowser(t, h.url)
			p := b.post("/console/signin", url.Values{"token": {tt.token}})
			if p.code != http.StatusUnauthorized || !strings.Contains(p.body, tt.want) {
				t.Errorf("sign in with %s token: %d, want 401 saying %q\n%s", tt.name, p.code, tt.want, p.body)
			}
			if tt.token != "" && strings.Contains(p.body, tt.token) {
				t.Errorf("the page repeats the token")
			}
			if p.header.Get("Set-Cookie") != "" || !b.signedOut() {
				t.Errorf("a refused sign-in set a cookie")
			}
		})
	}
}

// newToken stores a token of role in the hub's org and returns its secret.
func (h *hubEnv) newToken(name string, role store.Role) (string, store.Token) {
	h.t.Helper()
	secret, hash := store.NewToken()
	tok, err := h.store.CreateToken(h.t.Context(), store.Token{OrgID: h.hub.Org.ID, Name: name, Role: role, Hash: hash, CreatedAt: time.Now()})
	if err != nil {
		h.t.Fatal(err)
	}
	return secret, tok
}

func (h *hubEnv) tokenNames() []string {
	h.t.Helper()
	ts, err := h.store.ListTokens(h.t.Context(), h.hub.Org.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, tk := range ts {
		if tk.RevokedAt.IsZero() {
			names = append(names, tk.Name)
		}
	}
	return names
}

func TestConsoleMemberSeesAdminChanges(t *testing.T) {
	h := startHub(t)
	m, err := h.store.CreateMachine(t.Context(), store.Machine{OrgID: h.hub.Org.ID, Name: "box", Hostname: "box", PublicKey: storetest.NewKey(t), CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	memberSecret, _ := h.newToken("viewer", store.RoleMember)
	member := newBrowser(t, h.url)
	member.signIn(memberSecret)
	for _, path := range []string{"/console/machines", "/console/activity", "/console/environments"} {
		if p := member.get(path); p.code != http.StatusOK {
			t.Errorf("member GET %s: %d", path, p.code)
		} else if strings.Contains(p.body, "Revoke") || strings.Contains(p.body, "Pair a machine") {
			t.Errorf("member GET %s offers a change", path)
		}
	}
	before := h.tokenNames()
	for _, tt := range []struct {
		path string
		form url.Values
	}{
		{"/console/pair", nil},
		{"/console/machines/" + m.ID + "/revoke", nil},
		{"/console/tokens", url.Values{"name": {"sneaky"}, "role": {"admin"}}},
		{"/console/environments", url.Values{"name": {"e1"}, "image": {"ghcr.io/acme/x:1"}}},
		{"/console/environments/builtin/default", nil},
	} {
		if p := member.post(tt.path, tt.form); p.code != http.StatusForbidden {
			t.Errorf("member POST %s: %d, want 403\n%s", tt.path, p.code, p.body)
		}
	}
	if p := member.get("/console/tokens"); p.code != http.StatusForbidden {
		t.Errorf("member GET tokens: %d, want 403", p.code)
	}
	got, err := h.store.Machine(t.Context(), m.ID)
	if err != nil || !got.RevokedAt.IsZero() {
		t.Errorf("a member's revoke changed the machine: %v %v", got.RevokedAt, err)
	}
	if after := h.tokenNames(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("a member's POST changed tokens: %v -> %v", before, after)
	}

	// The admin changes: revoke through the confirmation page.
	admin := newBrowser(t, h.url)
	admin.signIn(h.owner)
	if p := admin.get("/console/machines/" + m.ID + "/revoke"); p.code != http.StatusOK || !strings.Contains(p.body, "Revoke box") {
		t.Fatalf("confirmation page: %d\n%s", p.code, p.body)
	}
	if p := admin.post("/console/machines/"+m.ID+"/revoke", nil); p.code != http.StatusSeeOther {
		t.Fatalf("admin revoke: %d\n%s", p.code, p.body)
	}
	if p := admin.get("/console/machines"); !strings.Contains(p.body, `class="status revoked"`) {
		t.Errorf("machines page after revoke:\n%s", p.body)
	}
}

func TestConsoleCrossOriginRefused(t *testing.T) {
	h := startHub(t)
	b := newBrowser(t, h.url)
	b.signIn(h.owner)
	before := h.tokenNames()
	for _, tt := range []struct {
		name   string
		header []string
	}{
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}},
		{"same-site fetch", []string{"Sec-Fetch-Site", "same-site"}},
		{"foreign origin", []string{"Sec-Fetch-Site", "", "Origin", "http://evil.example"}},
	} {
		p := b.post("/console/tokens", url.Values{"name": {"csrf"}, "role": {"admin"}}, tt.header...)
		if p.code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, p.code)
		}
	}
	if p := b.post("/console/signout", nil, "Sec-Fetch-Site", "cross-site"); p.code != http.StatusForbidden || b.signedOut() {
		t.Errorf("cross-site sign-out: %d (signed out: %v)", p.code, b.signedOut())
	}
	if after := h.tokenNames(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("a cross-origin POST changed tokens: %v -> %v", before, after)
	}
	// The same form from the console itself works.
	if p := b.post("/console/tokens", url.Values{"name": {"ci"}, "role": {"member"}}); p.code != http.StatusOK || !strings.Contains(p.body, "shown only this once") {
		t.Errorf("same-origin create: %d\n%s", p.code, p.body)
	}
}

func TestConsoleEscapes(t *testing.T) {
	h := startHub(t)
	const evil = `<script>alert("x")</script>`
	if _, err := h.store.CreateMachine(t.Context(), store.Machine{OrgID: h.hub.Org.ID, Name: evil, Hostname: evil, PublicKey: storetest.NewKey(t), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, h.url)
	b.signIn(h.owner)
	p := b.get("/console/machines")
	if strings.Contains(p.body, evil) || !strings.Contains(p.body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("machine name not escaped:\n%s", p.body)
	}
	checkPage(t, "machines", p)
	// A token name too, on the page that shows it once.
	p = b.post("/console/tokens", url.Values{"name": {evil}, "role": {"member"}})
	if strings.Contains(p.body, evil) {
		t.Errorf("token name not escaped:\n%s", p.body)
	}
	checkPage(t, "new token", p)
}

func TestConsoleSessions(t *testing.T) {
	h := startHub(t)
	t.Run("sign out ends the session", func(t *testing.T) {
		b := newBrowser(t, h.url)
		b.signIn(h.owner)
		u, _ := url.Parse(h.url)
		cookies := b.c.Jar.Cookies(u)
		if len(cookies) != 1 {
			t.Fatalf("cookies %v", cookies)
		}
		if p := b.post("/console/signout", nil); p.code != http.StatusSeeOther {
			t.Fatalf("sign out: %d", p.code)
		}
		if !b.signedOut() {
			t.Error("still signed in after signing out")
		}
		// The old cookie, replayed, opens nothing.
		replay := newBrowser(t, h.url)
		replay.c.Jar.SetCookies(u, cookies)
		if !replay.signedOut() {
			t.Error("a signed-out session's cookie still works")
		}
	})
	t.Run("revoking the token ends the session", func(t *testing.T) {
		secret, tok := h.newToken("temp", store.RoleAdmin)
		b := newBrowser(t, h.url)
		b.signIn(secret)
		if b.signedOut() {
			t.Fatal("not signed in")
		}
		admin := newBrowser(t, h.url)
		admin.signIn(h.owner)
		if p := admin.post("/console/tokens/"+tok.ID+"/revoke", nil); p.code != http.StatusSeeOther {
			t.Fatalf("revoke: %d\n%s", p.code, p.body)
		}
		if !b.signedOut() {
			t.Error("the session outlived its revoked token")
		}
	})
	t.Run("cookie attributes", func(t *testing.T) {
		b := newBrowser(t, h.url)
		p := b.post("/console/signin", url.Values{"token": {h.owner}})
		sc := p.header.Get("Set-Cookie")
		for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
			if !strings.Contains(sc, want) {
				t.Errorf("Set-Cookie %q lacks %s", sc, want)
			}
		}
		if strings.Contains(sc, h.owner) {
			t.Error("the cookie holds the API token")
		}
	})
}

func TestConsoleSessionExpiry(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	hb := startHubWith(t, clock.Now)
	b := newBrowser(t, hb.url)
	b.signIn(hb.owner)
	clock.add(11 * time.Hour)
	if b.signedOut() {
		t.Fatal("signed out before the session expired")
	}
	clock.add(2 * time.Hour)
	if !b.signedOut() {
		t.Error("still signed in after the session expired")
	}
}

func TestConsoleLink(t *testing.T) {
	h := startHub(t)
	code, err := console.CreateLink(t.Context(), h.store, h.hub.Org.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, h.url)
	// Opening the link asks first: a preview does not spend it.
	for range 2 {
		if p := b.get("/console/link?code=" + url.QueryEscape(code)); p.code != http.StatusOK || !strings.Contains(p.body, "Sign in as the hub's owner") {
			t.Fatalf("link page: %d\n%s", p.code, p.body)
		}
	}
	p := b.post("/console/link", url.Values{"code": {code}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("redeem: %d\n%s", p.code, p.body)
	}
	if p := b.get("/console/tokens"); p.code != http.StatusOK || !strings.Contains(p.body, console.OwnerLinkName) {
		t.Errorf("owner's tokens page: %d", p.code)
	}
	other := newBrowser(t, h.url)
	if p := other.post("/console/link", url.Values{"code": {code}}); p.code != http.StatusUnauthorized || !strings.Contains(p.body, "used or has expired") {
		t.Errorf("second use: %d\n%s", p.code, p.body)
	}
	if !other.signedOut() {
		t.Error("a used link signed someone in")
	}
}

// fakeClock is a clock tests move.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startHubWith starts a hub on the clock now.
func startHubWith(t *testing.T, now func() time.Time) *hubEnv {
	t.Helper()
	hb := hubtest.Start(t, hubtest.Options{Now: now})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	return h
}

// sseEvents reads a console event stream, sending "event\ndata" strings.
func sseEvents(ctx context.Context, t *testing.T, b *browser, path string) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Jar: b.c.Jar}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev string
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && ev != "":
				select {
				case ch <- ev + "\n" + strings.Join(data, "\n"):
				case <-ctx.Done():
					return
				}
				ev, data = "", nil
			}
		}
	}()
	return ch
}

// waitEvent returns the first event of kind whose data contains want.
func waitEvent(t *testing.T, ch <-chan string, kind, want string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended before a %q event with %q", kind, want)
			}
			if strings.HasPrefix(e, kind+"\n") && strings.Contains(e, want) {
				return e
			}
		case <-timeout:
			t.Fatalf("no %q event with %q within 20 s", kind, want)
		}
	}
}

// codeRE finds the pairing code on the pairing page.
var codeRE = regexp.MustCompile(`<p class="code"[^>]*>([A-Z0-9]{4}-[A-Z0-9]{4})</p>`)

func TestConsolePairActivityOutputRevoke(t *testing.T) {
	h := startHub(t)
	b := newBrowser(t, h.url)
	b.signIn(h.owner)

	// Pair a machine: the page shows a fresh code and the two commands,
	// then flips when the machine is online.
	p := b.post("/console/pair", nil)
	m := codeRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no code on the pairing page:\n%s", p.body)
	}
	after := regexp.MustCompile(`pair/events\?after=(\d+)`).FindStringSubmatch(p.body)
	if after == nil {
		t.Fatalf("no live part on the pairing page:\n%s", p.body)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	paired := sseEvents(ctx, t, b, "/console/pair/events?after="+after[1])

	dir := t.TempDir()
	mc := &machine{ws: filepath.Join(dir, "ws"), cfg: filepath.Join(dir, "config")}
	if err := os.Mkdir(mc.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	pm, err := agentd.Pair(t.Context(), agentd.PairOptions{Hub: h.url, Code: m[1], ConfigDir: mc.cfg, Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	mc.id = pm.MachineID
	h.run(h.owner, mc, filepath.Join(dir, "state"))
	waitEvent(t, paired, "replace", "<strong>laptop</strong> ("+mc.id)
	waitEvent(t, paired, "done", "")

	if p := b.get("/console/machines"); !strings.Contains(p.body, `class="status online"`) || !strings.Contains(p.body, "laptop") {
		t.Errorf("machines page after pairing:\n%s", p.body)
	}

	// A command run with agentctl arrives live on Activity.
	live := sseEvents(ctx, t, b, "/console/activity/events?after=0&machine="+mc.id)
	if code, out, errs := h.agentctl(h.owner, mc.id, "sh", "echo hello-console; echo '<b>bold</b>'"); code != 0 {
		t.Fatalf("agentctl: %d %s %s", code, out, errs)
	}
	row := waitEvent(t, live, "prepend", "process.exit")
	if !strings.Contains(row, "hello-console") || !strings.Contains(row, "&lt;b&gt;bold&lt;/b&gt;") {
		t.Errorf("live row lacks the escaped output:\n%s", row)
	}
	id := regexp.MustCompile(`/console/activity/(\d+)/output`).FindStringSubmatch(row)
	if id == nil {
		t.Fatalf("no output link in the row:\n%s", row)
	}

	// The command's output page, read from the machine, and its download.
	out := b.get("/console/activity/" + id[1] + "/output")
	if out.code != http.StatusOK || !strings.Contains(out.body, "hello-console") || strings.Contains(out.body, "offline") {
		t.Fatalf("output page: %d\n%s", out.code, out.body)
	}
	checkPage(t, "output", out)
	dl := b.get("/console/activity/" + id[1] + "/output?download=1")
	if dl.body != "hello-console\n<b>bold</b>\n" || !strings.HasPrefix(dl.header.Get("Content-Disposition"), "attachment") {
		t.Errorf("download: %q %q", dl.body, dl.header.Get("Content-Disposition"))
	}
	if p := b.get("/console/activity?actor=tester&machine=" + mc.id); !strings.Contains(p.body, "hello-console") {
		t.Errorf("filtered history lacks the command")
	}
	if p := b.get("/console/activity?actor=nobody"); strings.Contains(p.body, "hello-console") {
		t.Errorf("the actor filter let another's command through")
	}
	if p := b.get("/console/machines"); !strings.Contains(p.body, "now, up ") || !strings.Contains(p.body, "<td>0</td>") {
		t.Errorf("machines page lacks the uptime, or counts a finished command as running:\n%s", p.body)
	}

	// A running command's output streams onto its page as it is written.
	if code, out, errs := h.agentctl(h.owner, mc.id, "exec", "-d", "--", "sh", "-c",
		"echo first; while [ ! -e go ]; do sleep 0.02; done; echo second"); code != 0 {
		t.Fatalf("agentctl exec -d: %d %s %s", code, out, errs)
	}
	row = waitEvent(t, live, "prepend", "while [ ! -e go ]")
	if p := b.get("/console/machines"); !strings.Contains(p.body, "<td>1</td>") {
		t.Errorf("machines page does not count the running command:\n%s", p.body)
	}
	longID := regexp.MustCompile(`/console/activity/(\d+)/output`).FindStringSubmatch(row)
	running := b.get("/console/activity/" + longID[1] + "/output")
	liveURL := regexp.MustCompile(`data-sse="(/console/activity/\d+/output/events\?from=\d+&amp;stderr_from=\d+)"`).FindStringSubmatch(running.body)
	if !strings.Contains(running.body, "Still running") || liveURL == nil {
		t.Fatalf("running command's page:\n%s", running.body)
	}
	checkPage(t, "running output", running)
	follow := sseEvents(ctx, t, b, html.UnescapeString(liveURL[1]))
	if err := os.WriteFile(filepath.Join(mc.ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, follow, "append", "second")
	waitEvent(t, follow, "append", "exit 0")
	waitEvent(t, follow, "done", "")

	// Offline: the page says so at once, with the output the record kept.
	mc.stop()
	h.waitStatus(h.owner, mc.id, hubv1.MachineStatus_MACHINE_STATUS_OFFLINE)
	start := time.Now()
	out = b.get("/console/activity/" + id[1] + "/output")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the output page of an offline machine took %v", took)
	}
	if out.code != http.StatusOK || !strings.Contains(out.body, "is offline (last seen") || !strings.Contains(out.body, "hello-console") {
		t.Errorf("offline output page: %d\n%s", out.code, out.body)
	}

	// Revoke, then the page shows it.
	if p := b.post("/console/machines/"+mc.id+"/revoke", nil); p.code != http.StatusSeeOther {
		t.Fatalf("revoke: %d", p.code)
	}
	if p := b.get("/console/machines"); !strings.Contains(p.body, `class="status revoked"`) {
		t.Errorf("machines page after revoke:\n%s", p.body)
	}
}

func TestConsoleActivityPaging(t *testing.T) {
	h := startHub(t)
	mach, err := h.store.CreateMachine(t.Context(), store.Machine{OrgID: h.hub.Org.ID, Name: "box", Hostname: "box", PublicKey: storetest.NewKey(t), CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var recs []store.Activity
	for i := 1; i <= 120; i++ {
		recs = append(recs, store.Activity{Seq: uint64(i), Time: time.Now(), Record: []byte(fmt.Sprintf(`{"seq":%d,"kind":"file.write","summary":"wrote f%03d","actor":"tester"}`, i, i))})
	}
	if err := h.store.AppendActivity(t.Context(), mach.ID, recs); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, h.url)
	b.signIn(h.owner)
	var seen []string
	next := "/console/activity"
	summaryRE := regexp.MustCompile(`wrote f(\d{3})`)
	olderRE := regexp.MustCompile(`href="/console/activity\?([^"]*before=\d+[^"]*)">Older`)
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		p := b.get(next)
		for _, m := range summaryRE.FindAllStringSubmatch(p.body, -1) {
			seen = append(seen, m[1])
		}
		next = ""
		if m := olderRE.FindStringSubmatch(p.body); m != nil {
			next = "/console/activity?" + html.UnescapeString(m[1])
		}
	}
	if len(seen) != 120 || seen[0] != "120" || seen[119] != "001" {
		t.Errorf("paged through %d records (first %v, last %v), want 120 newest first", len(seen), seen[:1], seen[len(seen)-1:])
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			t.Fatalf("records out of order or repeated at %d: %v", i, seen[i-1:i+1])
		}
	}
}

func TestConsoleEnvironments(t *testing.T) {
	h := startHub(t)
	ctx := t.Context()
	now := time.Now()
	e, err := h.store.CreateEnvironment(ctx, store.Environment{OrgID: h.hub.Org.ID, Name: "acme-img", Image: "ghcr.io/acme/sandbox:v1", Network: "public", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	report := `[{"id":"reference.host","status":"pass","title":"the reference names an allowed registry"},
		{"id":"base.build","status":"warn","title":"built on the current base","breaks":"older tools <than> the base's","fix":"rebuild FROM ghcr.io/devdepot-ai/sandbox-base:1"},
		{"id":"agent.python","status":"pass","title":"Python cells run"}]`
	if _, err := h.store.FinishValidation(ctx, h.hub.Org.ID, e.Name, e.Generation, store.Environment{State: store.EnvReady,
		Pinned: "ghcr.io/acme/sandbox@sha256:" + strings.Repeat("ab", 32), Report: []byte(report),
		Inventory: []byte(`{"tools":["az","terraform"],"python_packages":["pandas==2.2.0"]}`)}, now); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, h.url)
	b.signIn(h.owner)
	list := b.get("/console/environments")
	for _, want := range []string{">builtin<", `href="/console/environments/acme-img"`, "New environment → Custom image"} {
		if !strings.Contains(list.body, want) {
			t.Errorf("environments page lacks %q", want)
		}
	}
	p := b.get("/console/environments/acme-img")
	checkPage(t, "environment", p)
	for _, want := range []string{"sha256:abab", "Warnings", "older tools &lt;than&gt; the base&#39;s", "Fix: rebuild FROM", "Python cells run",
		"az, terraform", "pandas==2.2.0", ">Update<", ">Re-validate<", `class="state ready"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("environment page lacks %q", want)
		}
	}
	if w, r := strings.Index(p.body, "Warnings"), strings.Index(p.body, "<h2>Report"); w < 0 || r < w || strings.Count(p.body, "built on the current base") != 1 {
		t.Errorf("warnings are not apart from the report")
	}

	// Make it the org's default through the button.
	if p := b.post("/console/environments/acme-img/default", nil); p.code != http.StatusSeeOther {
		t.Fatalf("default: %d\n%s", p.code, p.body)
	}
	if def, err := h.store.DefaultEnvironment(ctx, h.hub.Org.ID); err != nil || def != "acme-img" {
		t.Errorf("default = %q, %v", def, err)
	}

	// Refused (this hub runs no sandboxes): the hub's message, the form
	// refilled, nothing made.
	p = b.post("/console/environments", url.Values{"name": {"e2"}, "image": {"acme/sandbox"}, "network": {"public"}})
	if p.code != http.StatusConflict || !strings.Contains(p.body, "runs no sandboxes") || !strings.Contains(p.body, `value="acme/sandbox"`) {
		t.Errorf("bad reference: %d\n%s", p.code, p.body)
	}
	if _, err := h.store.Environment(ctx, h.hub.Org.ID, "e2"); err == nil {
		t.Error("a refused environment was stored")
	}
	if p := b.get("/console/environments/nope"); p.code != http.StatusNotFound {
		t.Errorf("unknown environment: %d", p.code)
	}
}
