package hub_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
)

// startDomainHub is startHub with previews under the domain
// preview.test on the hub's own port (agenthub serve --preview-domain).
func startDomainHub(t *testing.T) *hubEnv {
	t.Helper()
	hb := hubtest.Start(t, hubtest.Options{PreviewDomain: "preview.test"})
	h := &hubEnv{t: t, hub: hb, store: hb.Store, owner: hb.Token}
	h.sync()
	return h
}

// catchAll is an app that answers every path with what it was sent.
func catchAll(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"app": "yes", "method": r.Method, "path": r.URL.Path, "host": r.Host,
			"xfh": r.Header.Get("X-Forwarded-Host"), "cookie": r.Header.Get("Cookie")})
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// hostReq sends a request to the hub's port with the given Host.
func (h *hubEnv) hostReq(method, host, path string, header ...string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With --preview-domain, expose prints https-style URLs of one DNS label
// under the domain on the hub's port; a request whose Host is such a
// name reaches the app whatever its path (the console's, the API's, the
// tunnel's: they are the app's paths there), and any other name under the
// domain (two labels, the bare domain, an unknown token) answers the
// preview server's 404, never the console; a gRPC call with a preview's
// authority is refused; the console's host serves no preview; unexpose
// takes the domain URL.
func TestPreviewDomain(t *testing.T) {
	h := startDomainHub(t)
	m := h.startMachine(h.owner)
	app := catchAll(t)
	_, port, _ := net.SplitHostPort(h.addr)

	code, out, stderr := h.agentctl(h.owner, m.id, "port", "expose", fmt.Sprint(app), "--access", "public")
	url := strings.TrimSpace(out)
	re := regexp.MustCompile(`^http://([a-z2-7]{52})\.preview\.test:` + port + `/$`)
	mt := re.FindStringSubmatch(url)
	if code != 0 || mt == nil {
		t.Fatalf("expose: exit %d, %q %s; want a URL like %s", code, out, stderr, re)
	}
	token := mt[1]
	host := token + ".preview.test:" + port

	for _, tc := range []struct{ method, host, path string }{
		{"GET", host, "/"},
		{"GET", strings.ToUpper(token) + ".PREVIEW.TEST.:" + port, "/x"},
		{"GET", host, "/console/"},
		{"GET", host, "/console/machines"},
		{"GET", host, "/healthz"},
		{"GET", host, "/metrics"},
		{"GET", host, "/v1/tunnel"},
		{"POST", host, "/v1/pair"},
		{"GET", host, "/p/" + token + "/"},
	} {
		st, body := h.hostReq(tc.method, tc.host, tc.path)
		var got map[string]string
		if err := json.Unmarshal([]byte(body), &got); st != 200 || err != nil || got["app"] != "yes" || got["path"] != tc.path ||
			got["method"] != tc.method || got["host"] != fmt.Sprintf("127.0.0.1:%d", app) || got["xfh"] != tc.host {
			t.Errorf("%s %s with Host %s: %d %q; want the app's answer", tc.method, tc.path, tc.host, st, body)
		}
	}
	for _, tc := range []struct{ host, path, want string }{
		{"preview.test:" + port, "/console/", "Not a preview"},
		{"preview.test", "/healthz", "Not a preview"},
		{"x." + host, "/console/", "Not a preview"},
		{"a_b.preview.test", "/", "Not a preview"},
		{strings.Repeat("a", 52) + ".preview.test", "/console/", "No such preview"},
		{strings.Repeat("a", 52) + ".preview.test", "/healthz", "No such preview"},
	} {
		if st, body := h.hostReq("GET", tc.host, tc.path); st != http.StatusNotFound || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s with Host %s: %d %q; want 404 %q", tc.path, tc.host, st, body, tc.want)
		}
	}

	// The API by a preview's authority: refused before any handler.
	cc, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(host))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(authCtx(t.Context(), h.owner, ""), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.NotFound ||
		!strings.Contains(err.Error(), "is a preview's host") {
		t.Errorf("health check with a preview's authority: %v; want NotFound", err)
	}
	if _, err := healthpb.NewHealthClient(h.conn()).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health check on the hub's own host: %v", err)
	}

	// The console's host serves no preview, by path nor by token.
	for _, p := range []string{"/p/" + token + "/", "/" + token + "/"} {
		if st, body := h.hostReq("GET", h.addr, p); st != http.StatusNotFound || strings.Contains(body, `"app"`) {
			t.Errorf("GET %s on the hub's host: %d %q; want 404", p, st, body)
		}
	}

	// Private under the domain: a bearer token, or a browser sent to
	// sign in through the console (TestPreviewDomainSignIn).
	code, out, _ = h.agentctl(h.owner, m.id, "port", "expose", fmt.Sprint(app))
	priv := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), "http://"), "/")
	if st, body := h.hostReq("POST", priv, "/x"); code != 0 || st != http.StatusUnauthorized || !strings.Contains(body, "Authorization: Bearer") {
		t.Errorf("private preview without credentials: %d %q", st, body)
	}
	if st, body := h.hostReq("GET", priv, "/x", "Authorization", "Bearer "+h.owner); st != http.StatusOK || !strings.Contains(body, `"path":"/x"`) {
		t.Errorf("private preview with the owner's token: %d %q", st, body)
	}

	if code, _, stderr := h.agentctl(h.owner, m.id, "port", "unexpose", url); code != 0 {
		t.Fatalf("unexpose %s: %d %s", url, code, stderr)
	}
	if st, body := h.hostReq("GET", host, "/"); st != http.StatusNotFound || !strings.Contains(body, "No such preview") {
		t.Errorf("after unexpose: %d %q; want 404", st, body)
	}
}
