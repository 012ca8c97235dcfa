package hub_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/devdepot-ai/agentd/agentd"
	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/hub/store/storetest"
	"github.com/devdepot-ai/agentd/internal/testca"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

func TestConsolePagesAndCSP(t *testing.T) {
	h := startHub(t)
	b := newBrowser(t, h.url)
	if !b.signedOut() {
		t.Fatal("a console page was served without a session")
	}
	checkPage(t, "sign-in", b.get("/console/signin"))
	checkPage(t, "link", b.get("/console/link?code=acl_x"))
	b.signIn(h.owner)
	for _, path := range []string{"/console/machines", "/console/activity", "/console/environments", "/console/usage", "/console/tokens"} {
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

func TestConsoleSessionSurvivesRestart(t *testing.T) {
	h := startHub(t)
	b := newBrowser(t, h.url)
	b.signIn(h.owner)
	addr := h.addr
	h.stop()
	h.serve(addr)
	if b.signedOut() {
		t.Error("the session did not survive the hub's restart")
	}
}

func TestConsoleCookieUnderTLS(t *testing.T) {
	ca := testca.New(t)
	h := startHubTLS(t, ca)
	b := newBrowser(t, h.url)
	b.c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}}
	p := b.post("/console/signin", url.Values{"token": {h.owner}})
	sc := p.header.Get("Set-Cookie")
	for _, want := range []string{"__Host-agenthub_console=", "Secure", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	if p := b.get("/console/machines"); p.code != http.StatusOK || !strings.HasPrefix(p.header.Get("Strict-Transport-Security"), "max-age=") {
		t.Errorf("signed-in page under TLS: %d, HSTS %q", p.code, p.header.Get("Strict-Transport-Security"))
	}
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
	// The machine's record is labelled its account, with the actor it
	// claims; the hub's own record of the call names the token.
	if !strings.Contains(row, "reported (daemon's account)") || !strings.Contains(row, "claims tester") || strings.Contains(row, "<td>tester</td>") {
		t.Errorf("the daemon's record is not labelled as its account:\n%s", row)
	}
	if p := b.get("/console/activity?machine=" + mc.id); !strings.Contains(p.body, "<td>tester</td>") || !strings.Contains(p.body, "called ProcessService/Start") {
		t.Errorf("the hub's own record of the call is not on the activity page with its actor")
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

	// The machines page does not ask an offline machine what it runs.
	start = time.Now()
	if p := b.get("/console/machines"); !strings.Contains(p.body, `<span class="sr">not known: offline</span>`) {
		t.Errorf("machines page of an offline machine:\n%s", p.body)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the machines page with an offline machine took %v", took)
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
	e, err := h.store.CreateEnvironment(ctx, store.Environment{OrgID: h.hub.Org.ID, Name: "acme-img", Image: "ghcr.io/acme/sandbox:v1", Network: "public", Isolation: "gvisor", CreatedAt: now})
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
	for _, want := range []string{">builtin<", `href="/console/environments/acme-img"`, "New environment → Custom image", "<th scope=\"col\">Isolation</th>", "<td>gvisor</td>",
		`name="isolation" value="runc" checked`} {
		if !strings.Contains(list.body, want) {
			t.Errorf("environments page lacks %q", want)
		}
	}
	p := b.get("/console/environments/acme-img")
	checkPage(t, "environment", p)
	for _, want := range []string{"sha256:abab", "Warnings", "older tools &lt;than&gt; the base&#39;s", "Fix: rebuild FROM", "Python cells run",
		"az, terraform", "pandas==2.2.0", ">Update<", ">Re-validate<", `class="state ready"`, "<dt>Isolation</dt><dd>gvisor</dd>"} {
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
	p = b.post("/console/environments", url.Values{"name": {"e2"}, "image": {"acme/sandbox"}, "network": {"public"}, "isolation": {"gvisor"}})
	if p.code != http.StatusConflict || !strings.Contains(p.body, "runs no sandboxes") || !strings.Contains(p.body, `value="acme/sandbox"`) ||
		!strings.Contains(p.body, `name="isolation" value="gvisor" checked`) {
		t.Errorf("bad reference: %d\n%s", p.code, p.body)
	}
	if _, err := h.store.Environment(ctx, h.hub.Org.ID, "e2"); err == nil {
		t.Error("a refused environment was stored")
	}
	if p := b.get("/console/environments/nope"); p.code != http.StatusNotFound {
		t.Errorf("unknown environment: %d", p.code)
	}
}
