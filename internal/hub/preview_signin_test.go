package hub_test

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// hostGet sends GET path to the hub's port with Host host and the
// cookie given, following no redirect.
func (h *hubEnv) hostGet(host, path, cookie string) page {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodGet, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Host = host
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	c := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{code: resp.StatusCode, header: resp.Header, body: string(body)}
}

// A browser opening a private or org preview under the preview domain is
// sent to the console's preview-auth page on the hub's origin, which
// (signed in, allowed) sends it back with a one-time code that the
// preview host trades for a cookie of its own, then on to the path it
// asked for; the app never sees that cookie. A spent, expired or another
// exposure's code, another org's member, a member on the owner's private
// preview, and a browser not signed in are refused.
func TestPreviewDomainSignIn(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	hb := hubtest.Start(t, hubtest.Options{PreviewDomain: "preview.test", Now: now})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	m := h.startMachine(h.owner)
	app := catchAll(t)
	_, port, _ := net.SplitHostPort(h.addr)

	expose := func(access string) (host, token string) {
		code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", fmt.Sprint(app), "--access", access)
		host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), "http://"), "/")
		if code != 0 || !strings.HasSuffix(host, ".preview.test:"+port) {
			t.Fatalf("expose --access %s: %d %q %s", access, code, out, stderr)
		}
		token, _, _ = strings.Cut(host, ".")
		return host, token
	}
	priv, _ := expose("private")
	org, orgToken := expose("org")

	owner := newBrowser(t, h.url)
	owner.signIn(h.owner)

	// hop: the preview host's redirect to the console, and the console's
	// answer for b.
	hop := func(b *browser, host, path string) (string, page) {
		t.Helper()
		p := h.hostGet(host, path, "")
		loc := p.header.Get("Location")
		token, _, _ := strings.Cut(host, ".")
		want := h.url + "/console/preview-auth?" + url.Values{"token": {token}, "return": {path}}.Encode()
		if p.code != http.StatusSeeOther || loc != want {
			t.Fatalf("GET %s on %s without credentials: %d to %q; want 303 to %q", path, host, p.code, loc, want)
		}
		return loc, b.get(strings.TrimPrefix(loc, h.url))
	}
	codeOf := func(p page, host string) string {
		t.Helper()
		u, err := url.Parse(p.header.Get("Location"))
		if p.code != http.StatusSeeOther || err != nil || u.Host != host || u.Path != "/.agentd-auth" || !strings.HasPrefix(u.Query().Get("code"), "apc_") {
			t.Fatalf("preview-auth: %d to %q; want 303 to http://%s/.agentd-auth?code=…", p.code, p.header.Get("Location"), host)
		}
		return u.Query().Get("code")
	}

	// The hop, end to end.
	_, p := hop(owner, priv, "/x/y?z=1")
	code := codeOf(p, priv)
	p = h.hostGet(priv, "/.agentd-auth?code="+url.QueryEscape(code), "")
	if p.code != http.StatusSeeOther || p.header.Get("Location") != "/x/y?z=1" {
		t.Fatalf("spending the code: %d to %q; want 303 to /x/y?z=1", p.code, p.header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "agentd_preview" {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Domain != "" || ck.Path != "/" || ck.MaxAge <= 0 || ck.MaxAge > 24*3600 || ck.Value == code {
		t.Fatalf("the preview host's cookie: %+v; want agentd_preview, HttpOnly, SameSite=Lax, host-only", ck)
	}
	cookie := ck.Name + "=" + ck.Value + "; app=kept"
	p = h.hostGet(priv, "/x/y?z=1", cookie)
	var got map[string]string
	if err := json.Unmarshal([]byte(p.body), &got); p.code != 200 || err != nil || got["path"] != "/x/y" || got["cookie"] != "app=kept" {
		t.Errorf("signed-in browser on the private preview: %d %q; want the app's answer, sent only the app's cookie", p.code, p.body)
	}
	// The code is spent; the cookie is this exposure's only.
	if p = h.hostGet(priv, "/.agentd-auth?code="+url.QueryEscape(code), ""); p.code != http.StatusForbidden || strings.Contains(p.body, `"app"`) {
		t.Errorf("a spent code: %d %q; want 403", p.code, p.body)
	}
	if p = h.hostGet(org, "/", cookie); p.code != http.StatusSeeOther {
		t.Errorf("the private preview's cookie on the org preview: %d %q; want the sign-in hop", p.code, p.body)
	}

	// Another exposure's code.
	_, p = hop(owner, org, "/")
	orgCode := codeOf(p, org)
	if p = h.hostGet(priv, "/.agentd-auth?code="+url.QueryEscape(orgCode), ""); p.code != http.StatusForbidden {
		t.Errorf("the org preview's code on the private one: %d %q; want 403", p.code, p.body)
	}
	// An expired code.
	_, p = hop(owner, org, "/")
	late := codeOf(p, org)
	skew.Store(int64(61 * time.Second))
	if p = h.hostGet(org, "/.agentd-auth?code="+url.QueryEscape(late), ""); p.code != http.StatusForbidden {
		t.Errorf("a code 61 s old: %d %q; want 403", p.code, p.body)
	}
	skew.Store(0)
	// A forged code.
	if p = h.hostGet(org, "/.agentd-auth?code=apc_"+orgToken, ""); p.code != http.StatusForbidden {
		t.Errorf("a made-up code: %d %q; want 403", p.code, p.body)
	}

	// A member of the org: the org preview, not the owner's private one.
	memberSecret, _ := h.newToken("member", store.RoleMember)
	member := newBrowser(t, h.url)
	member.signIn(memberSecret)
	_, p = hop(member, org, "/m")
	mc := codeOf(p, org)
	if p = h.hostGet(org, "/.agentd-auth?code="+url.QueryEscape(mc), ""); p.code != http.StatusSeeOther || p.header.Get("Location") != "/m" {
		t.Errorf("a member spending the org preview's code: %d %q", p.code, p.header.Get("Location"))
	}
	if _, p = hop(member, priv, "/"); p.code != http.StatusForbidden || !strings.Contains(p.body, "Not yours") {
		t.Errorf("a member on the owner's private preview: %d %q; want 403", p.code, p.body)
	}

	// Another org's member.
	_, otherSecret := h.otherOrg("beta")
	other := newBrowser(t, h.url)
	other.signIn(otherSecret)
	if _, p = hop(other, org, "/"); p.code != http.StatusForbidden || !strings.Contains(p.body, "Another org") {
		t.Errorf("another org's member on the org preview: %d %q; want 403", p.code, p.body)
	}

	// Not signed in: the console's sign-in first.
	anon := newBrowser(t, h.url)
	auth, p := hop(anon, priv, "/after")
	want := "/console/signin?" + url.Values{"next": {strings.TrimPrefix(auth, h.url)}}.Encode()
	if p.code != http.StatusSeeOther || p.header.Get("Location") != want {
		t.Fatalf("preview-auth not signed in: %d to %q; want %q", p.code, p.header.Get("Location"), want)
	}
	next := strings.TrimPrefix(auth, h.url)
	if p = anon.get(want); p.code != 200 || !strings.Contains(p.body, `name="next" value="`+html.EscapeString(next)+`"`) {
		t.Errorf("the sign-in page on the way: %d; want a form carrying next=%s\n%s", p.code, next, p.body)
	}
	if p = anon.post("/console/signin", url.Values{"token": {h.owner}, "next": {next}}); p.code != http.StatusSeeOther || p.header.Get("Location") != next {
		t.Fatalf("signing in on the way: %d to %q; want back to %s", p.code, p.header.Get("Location"), next)
	}
	if p = anon.get(next); p.code != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), "/.agentd-auth?code=apc_") {
		t.Errorf("preview-auth once signed in: %d to %q", p.code, p.header.Get("Location"))
	}
	// next is a console page or nothing: never another site.
	if p = anon.post("/console/signin", url.Values{"token": {h.owner}, "next": {"https://evil.test/"}}); p.header.Get("Location") != "/console/machines" {
		t.Errorf("sign-in with next=https://evil.test/: to %q; want /console/machines", p.header.Get("Location"))
	}
}
