package hub_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A private preview in Chromium, signed in to the console: the console's
// cookie admits the browser to the preview (same host, another port) and
// never reaches the app; the preview page's script can neither read a
// console page nor sign the browser out of the console (the POST is
// refused as cross-origin), nor see the console's cookie.
func TestPreviewInChromium(t *testing.T) {
	h, _ := startPreviewHub(t)
	m := h.startMachine(h.owner)
	shots := screenshotDir(t)
	cr := newChromium(t, h.url, shots)
	cr.signIn(h.owner)

	page := fmt.Sprintf(`<!doctype html><html><head><title>app</title></head><body>
<p id="cookie"></p><p id="out">running</p>
<script>
document.getElementById("cookie").textContent = "cookie:" + document.cookie;
const hub = %q;
Promise.all([
  fetch(hub + "/console/machines", {credentials: "include"}).then(r => r.text()).then(t => "read:" + t.length, () => "read:blocked"),
  fetch(hub + "/console/signout", {method: "POST", credentials: "include"}).then(r => "signout:" + r.status, () => "signout:sent"),
]).then(v => { document.getElementById("out").textContent = "done " + v.join(" "); });
</script></body></html>`, h.url)
	seen := make(chan string, 8)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Cookie")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", fmt.Sprint(l.Addr().(*net.TCPAddr).Port))
	if code != 0 {
		t.Fatalf("expose: %d %s", code, stderr)
	}
	url := strings.TrimSpace(out)
	cr.run("preview page", chromedp.Navigate(url), cr.contains("#out", "done "), cr.shot("preview"))
	res, err := chromedp.Run(cr.ctx, chromedp.Text(chromedp.CSS("#out")))
	if err != nil {
		t.Fatal(err)
	}
	cookie, err := chromedp.Run(cr.ctx, chromedp.Text(chromedp.CSS("#cookie")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res, "read:blocked") {
		t.Errorf("the preview page read a console page: %q", res)
	}
	if cookie != "cookie:" {
		t.Errorf("the preview page sees cookies: %q", cookie)
	}
	if c := <-seen; strings.Contains(c, "agenthub_console") {
		t.Errorf("the app got the console's cookie: %q", c)
	}
	// Still signed in: the page's sign-out POST was refused.
	cr.run("console after the preview", chromedp.Navigate(h.url+"/console/machines"),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)))

	// The machines page lists the preview; Revoke… and its confirmation
	// end it.
	cr.run("revoke the preview in the console",
		chromedp.Click(chromedp.Search(`//a[@aria-label and starts-with(@aria-label,"Revoke preview")]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[starts-with(text(),"Revoke preview")]`)), cr.shot("unexpose"),
		chromedp.Click(chromedp.Search(`//button[starts-with(text(),"Revoke preview")]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)))
	if st, _ := get(t, url); st != http.StatusNotFound {
		t.Errorf("after Revoke in the console the preview answers %d, want 404", st)
	}
}

// Previews under --preview-domain in Chromium (its host resolver sends
// *.preview.test to the hub on loopback): two exposures are two origins,
// so one's page reads neither the other's localStorage and cookies nor
// its pages, and neither reads the console, whose cookie never reaches
// them; a private one signs the console's user in through the hop.
func TestPreviewDomainInChromium(t *testing.T) {
	h := startDomainHub(t)
	m := h.startMachine(h.owner)
	shots := screenshotDir(t)
	cr := newChromium(t, h.url, shots, chromedp.Flag("host-resolver-rules", "MAP *.preview.test 127.0.0.1"))
	cr.signIn(h.owner)

	// The page stores its own secret, then reports what it can see of
	// the other preview (?other=URL) and of the console.
	const page = `<!doctype html><html><head><title>app</title></head><body><p id="out">running</p>
<script>
const q = new URLSearchParams(location.search);
const other = q.get("other") || "", hub = q.get("hub");
const seen = "storage:" + (localStorage.getItem("secret") || "none") + " cookie:" + (document.cookie || "none");
localStorage.setItem("secret", q.get("me"));
document.cookie = "secret=" + q.get("me") + "; path=/";
Promise.all([
  other ? fetch(other, {credentials: "include"}).then(r => r.text()).then(t => "other:" + t.length, () => "other:blocked") : "other:-",
  fetch(hub + "/console/machines", {credentials: "include"}).then(r => r.text()).then(t => "console:" + t.length, () => "console:blocked"),
]).then(v => { document.getElementById("out").textContent = "done " + seen + " " + v.join(" "); });
</script></body></html>`
	cookies := make(chan string, 16)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cookies <- r.Header.Get("Cookie")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	var urls []string
	for range 2 {
		code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", port, "--access", "public")
		if code != 0 || !strings.Contains(out, ".preview.test:") {
			t.Fatalf("expose: %d %q %s", code, out, stderr)
		}
		urls = append(urls, strings.TrimSpace(out))
	}
	visit := func(i int, other string) string {
		t.Helper()
		u := urls[i] + "?me=" + fmt.Sprint(i) + "&hub=" + h.url + "&other=" + other
		cr.run(fmt.Sprint("preview ", i), chromedp.Navigate(u), cr.contains("#out", "done "), cr.shot(fmt.Sprint("domain-preview-", i)))
		res, err := chromedp.Run(cr.ctx, chromedp.Text(chromedp.CSS("#out")))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if got := visit(0, ""); !strings.Contains(got, "storage:none cookie:none") || !strings.Contains(got, "console:blocked") {
		t.Errorf("first preview: %q; want nothing stored yet and the console blocked", got)
	}
	if got := visit(1, urls[0]); !strings.Contains(got, "storage:none cookie:none") || !strings.Contains(got, "other:blocked") ||
		!strings.Contains(got, "console:blocked") {
		t.Errorf("second preview: %q; want none of the first's storage or cookie, its page and the console blocked", got)
	}
	// Its own origin keeps its own.
	if got := visit(0, ""); !strings.Contains(got, "storage:0 cookie:secret=0") {
		t.Errorf("first preview again: %q; want its own storage and cookie", got)
	}
	// A private preview: the signed-in browser passes through the
	// console's sign-in hop and lands on the page it asked for, the code
	// gone from its URL and the preview's cookie out of the page's reach.
	code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", port, "--access", "private")
	if code != 0 || !strings.Contains(out, ".preview.test:") {
		t.Fatalf("expose --access private: %d %q %s", code, out, stderr)
	}
	urls = append(urls, strings.TrimSpace(out))
	if got := visit(2, ""); !strings.Contains(got, "storage:none cookie:none") {
		t.Errorf("private preview after the sign-in hop: %q; want the app's page, its cookie out of reach", got)
	}
	if loc, err := chromedp.Run(cr.ctx, chromedp.Location()); err != nil || strings.Contains(loc, "code=") || !strings.HasPrefix(loc, urls[2]+"?me=2") {
		t.Errorf("private preview's URL after the hop: %q %v; want %s?me=2… without the code", loc, err, urls[2])
	}
	for len(cookies) > 0 {
		if c := <-cookies; strings.Contains(c, "agenthub_console") || strings.Contains(c, "agentd_preview") || strings.Contains(c, "secret=1") && strings.Contains(c, "secret=0") {
			t.Errorf("an app got %q", c)
		}
	}
	cr.run("console after the previews", chromedp.Navigate(h.url+"/console/machines"),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Machines"]`)))
}
