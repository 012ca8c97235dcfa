package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// startPreviewHub is startHub with the preview server on and a clock the
// test moves.
func startPreviewHub(t *testing.T) (*hubEnv, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: time.Now()}
	hb := hubtest.Start(t, hubtest.Options{Preview: true, Now: clk.Now})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	return h, clk
}

// appServer is the app behind the previews: /echo answers with what it
// was sent (host, cookies, authorization, X-Forwarded-*), /sse streams
// three events a flush apart, /ws echoes WebSocket messages.
func appServer(t *testing.T) int {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"host": r.Host, "cookie": r.Header.Get("Cookie"),
			"authorization": r.Header.Get("Authorization"), "xff": r.Header.Get("X-Forwarded-For"), "path": r.URL.Path,
			"xfh": r.Header.Get("X-Forwarded-Host"), "xfp": r.Header.Get("X-Forwarded-Proto")})
	})
	mux.HandleFunc("/setcookie", func(w http.ResponseWriter, r *http.Request) {
		// A hostile app: it tries to sign the browser out of the console
		// (cookies ignore ports) and to widen its service worker to
		// every preview of the listener.
		for _, c := range []string{"agenthub_console=evil; Path=/", "__Host-agenthub_console=evil; Path=/; Secure", "app=ok; Path=/"} {
			w.Header().Add("Set-Cookie", c)
		}
		w.Header().Set("Service-Worker-Allowed", "/")
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo: "), b...)); err != nil {
				return
			}
		}
	})
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// get fetches url with the given headers: status and body.
func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Without --preview-domain or --preview-listen, expose fails saying how to turn previews on.
func TestPreviewOff(t *testing.T) {
	h := startHub(t)
	m := h.startMachine(h.owner)
	code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", "8000")
	if code != 1 || out != "" || !strings.Contains(stderr, "previews are off on this hub: start it with agenthub serve --preview-domain DOMAIN") || !strings.Contains(stderr, "--preview-listen ADDR") {
		t.Errorf("expose without previews: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// A paired machine's app through preview URLs: public for anyone, with
// the hub's cookies and token stripped and the upstream always
// 127.0.0.1:PORT; SSE streams; private admits only its creator (a
// WebSocket echo with the creator's token), org only the org's members;
// unexposed and expired URLs answer 404, an offline machine 503; port ls
// lists the exposures, and activity has expose, unexpose and each
// connection with its client address.
func TestPreviewThroughHub(t *testing.T) {
	h, clk := startPreviewHub(t)
	m := h.startMachine(h.owner)
	app := appServer(t)
	port := fmt.Sprint(app)
	member, _ := h.newToken("mia", store.RoleMember)
	_, betaToken := h.otherOrg("beta")

	expose := func(args ...string) string {
		t.Helper()
		code, out, stderr := h.agentctl(h.owner, m.id, append([]string{"port", "expose", port}, args...)...)
		if code != 0 || !strings.HasPrefix(out, h.hub.PreviewURL+"/p/") || !strings.HasSuffix(out, "/\n") {
			t.Fatalf("expose %v: exit %d, %q %s", args, code, out, stderr)
		}
		return strings.TrimSpace(out)
	}

	public := expose("--access", "public")
	if tok := strings.TrimSuffix(strings.TrimPrefix(public, h.hub.PreviewURL+"/p/"), "/"); len(tok) < 43 || strings.ContainsAny(tok, "/:@%") {
		t.Errorf("token %q: want at least 256 bits (43 base64 characters)", tok)
	}
	code, body := get(t, public+"echo", "Cookie", "agenthub_console=secret; theme=dark; __Host-agenthub_console=x", "Authorization", "Bearer "+h.owner,
		"X-Forwarded-For", "6.6.6.6")
	var seen map[string]string
	if code != 200 || json.Unmarshal([]byte(body), &seen) != nil {
		t.Fatalf("public GET: %d %s", code, body)
	}
	if seen["host"] != "127.0.0.1:"+port || seen["cookie"] != "theme=dark" || seen["authorization"] != "" || seen["xff"] != "127.0.0.1" || seen["path"] != "/echo" ||
		seen["xfh"] != strings.TrimPrefix(h.hub.PreviewURL, "http://") {
		t.Errorf("the app saw %v; want host 127.0.0.1:%s, only the app's cookie, no authorization, the client's address", seen, port)
	}
	// No path, header or token names another host or port: the app
	// answers (or nothing does), always at 127.0.0.1:PORT.
	for _, p := range []string{"http://127.0.0.2:1/echo", "//evil.example:80/echo", "..%2F..%2Fecho"} {
		code, body := get(t, public+p)
		if code == 200 && !strings.Contains(body, `"host":"127.0.0.1:`+port+`"`) {
			t.Errorf("GET %s reached %s", p, body)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, public+"echo", nil)
	req.Host = "127.0.0.1:1"
	req.Header.Set("X-Forwarded-Host", "127.0.0.2:22")
	req.Header.Set("Forwarded", "host=127.0.0.2:22")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"host":"127.0.0.1:`+port+`"`) {
			t.Errorf("with Host 127.0.0.1:1: %d %s", resp.StatusCode, b)
		}
	}
	token := strings.TrimSuffix(strings.TrimPrefix(public, h.hub.PreviewURL+"/p/"), "/")
	for _, p := range []string{token + ":1/echo", token + "%3A1/echo", token + "@127.0.0.2/echo"} {
		if code, _ := get(t, h.hub.PreviewURL+"/p/"+p); code != 404 {
			t.Errorf("GET /p/%s: %d, want 404", p, code)
		}
	}
	code, body = get(t, public+"sse")
	if code != 200 || body != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
		t.Errorf("SSE: %d %q", code, body)
	}

	private := expose()
	if code, body := get(t, private+"echo"); code != 401 || !strings.Contains(body, "sign in") {
		t.Errorf("private without credentials: %d %s", code, body)
	}
	if code, _ := get(t, private+"echo", "Authorization", "Bearer "+member); code != 403 {
		t.Errorf("private with another member's token: %d, want 403", code)
	}
	if code, body := get(t, private+"echo", "Authorization", "Bearer "+h.owner); code != 200 || !strings.Contains(body, `"authorization":""`) {
		t.Errorf("private with the creator's token: %d %s", code, body)
	}
	// However the token is spelled, the app never sees it.
	if code, body := get(t, private+"echo", "Authorization", "Bearer  "+h.owner); code != 200 || !strings.Contains(body, `"authorization":""`) {
		t.Errorf("private with the creator's token spelled 'Bearer  agt_…' (two spaces): %d %s", code, body)
	}
	// The app cannot set the hub's cookies nor widen its service worker.
	resp, err := http.Get(private + "setcookie")
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != 401 {
		// private without credentials: refused before the app is asked
		t.Errorf("private setcookie without credentials: %v %v", resp, err)
	}
	{
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, private+"setcookie", nil)
		req.Header.Set("Authorization", "Bearer "+h.owner)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Values("Set-Cookie"); len(got) != 1 || !strings.HasPrefix(got[0], "app=ok") {
			t.Errorf("Set-Cookie through the preview: %q, want only the app's own cookie", got)
		}
		if got := resp.Header.Get("Service-Worker-Allowed"); got != "" {
			t.Errorf("Service-Worker-Allowed through the preview: %q, want it dropped", got)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(private, "http")+"ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + h.owner}}})
	if err != nil {
		t.Fatalf("WebSocket through the private URL: %v", err)
	}
	ws.SetReadLimit(1 << 20)
	for _, msg := range []string{"one", strings.Repeat("x", 100000)} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, b, err := ws.Read(ctx); err != nil || string(b) != "echo: "+msg {
			t.Errorf("WebSocket echo of %d bytes: %d bytes back, %v", len(msg), len(b), err)
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")

	org := expose("--access", "org", "--ttl", "1h")
	if code, _ := get(t, org+"echo", "Authorization", "Bearer "+member); code != 200 {
		t.Errorf("org with a member's token: %d", code)
	}
	if code, body := get(t, org+"echo", "Authorization", "Bearer "+betaToken); code != 403 || !strings.Contains(body, "members of its org") {
		t.Errorf("org with another org's token: %d %s", code, body)
	}

	code, out, stderr := h.agentctl(h.owner, m.id, "port", "ls")
	if code != 0 || strings.Count(out, "\n"+"px-") != 3 || !strings.Contains(out, "EXPOSED") {
		t.Errorf("port ls: exit %d\n%s%s", code, out, stderr)
	}

	// Expired: an hour on, the org URL is gone; the others live on.
	clk.add(time.Hour + time.Second)
	if code, body := get(t, org+"echo", "Authorization", "Bearer "+member); code != 404 || !strings.Contains(body, "expired") {
		t.Errorf("expired: %d %s", code, body)
	}
	// Unexposed by URL, then by port.
	if code, out, stderr := h.agentctl(h.owner, "", "port", "unexpose", private); code != 0 || !strings.HasPrefix(out, "px-") {
		t.Errorf("unexpose URL: exit %d %q %s", code, out, stderr)
	}
	if code, _ := get(t, private+"echo", "Authorization", "Bearer "+h.owner); code != 404 {
		t.Errorf("unexposed private URL: %d, want 404", code)
	}
	if code, _ := get(t, public+"echo"); code != 200 {
		t.Errorf("public URL after the private one was unexposed: %d", code)
	}
	// Offline: the machine stops; the URL says so.
	m.stop()
	h.waitStatus(h.owner, m.id, hubv1.MachineStatus_MACHINE_STATUS_OFFLINE)
	if code, body := get(t, public+"echo"); code != 503 || !strings.Contains(body, "offline") {
		t.Errorf("offline machine: %d %s", code, body)
	}
	if code, out, stderr := h.agentctl(h.owner, m.id, "port", "unexpose", port); code != 0 || strings.Count(out, "px-") != 1 {
		t.Errorf("unexpose port: exit %d %q %s", code, out, stderr)
	}
	if code, _ := get(t, public+"echo"); code != 404 {
		t.Errorf("unexposed public URL: %d, want 404", code)
	}

	// Activity: the exposures, the unexposures, and the connections.
	want := map[string]int{"port.expose": 3, "port.unexpose": 2, "preview.connection": 1}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, out, _ := h.agentctl(h.owner, "", "--json", "activity")
		got := map[string]int{}
		client := false
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var w struct {
				Record struct{ Kind, Summary string }
			}
			_ = json.Unmarshal(sc.Bytes(), &w)
			r := w.Record
			got[r.Kind]++
			client = client || (r.Kind == "preview.connection" && strings.Contains(r.Summary, "client 127.0.0.1:"))
		}
		if got["port.expose"] == want["port.expose"] && got["port.unexpose"] == want["port.unexpose"] && got["preview.connection"] >= 1 && client {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("activity kinds %v (a connection with its client: %v); want %v", got, client, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// otherOrg makes another org with a member token: its id and the token.
func (h *hubEnv) otherOrg(name string) (string, string) {
	h.t.Helper()
	o, err := h.store.CreateOrg(h.t.Context(), name, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	secret, hash := store.NewToken()
	if _, err := h.store.CreateToken(h.t.Context(), store.Token{OrgID: o.ID, Name: name + "-member", Role: store.RoleMember, Hash: hash, CreatedAt: time.Now()}); err != nil {
		h.t.Fatal(err)
	}
	return o.ID, secret
}
