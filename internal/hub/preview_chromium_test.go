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
}
