package hub_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/devdepot-ai/agentd/internal/hub/console"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
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
	labelled := map[string]bool{} // ids a <label for> names
	type control struct {
		tag, id string
		ok      bool // inside a <label>, or aria-labelled
	}
	var controls []control
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attrs := map[string]string{}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
			}
			if n.Data == "label" && attrs["for"] != "" {
				labelled[attrs["for"]] = true
			}
			if isControl(n.Data, attrs["type"]) {
				controls = append(controls, control{n.Data, attrs["id"], insideLabel(n) || attrs["aria-label"] != "" || attrs["aria-labelledby"] != ""})
			}
			for _, a := range n.Attr {
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
	for _, c := range controls {
		if !c.ok && (c.id == "" || !labelled[c.id]) {
			t.Errorf("%s: <%s id=%q> has no label", what, c.tag, c.id)
		}
	}
}

// isControl reports whether an element is a form control that needs a
// label (buttons are named by their text).
func isControl(tag, typ string) bool {
	switch tag {
	case "select", "textarea":
		return true
	case "input":
		return typ != "hidden" && typ != "submit" && typ != "button"
	}
	return false
}

func insideLabel(n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == "label" {
			return true
		}
	}
	return false
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
