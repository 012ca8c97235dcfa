package egressproxy

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/allowlist"
)

// chain is a Forwarder and a Proxy joined by a real unix socket, with
// upstream servers on loopback that the Proxy's dialer maps names to.
type chain struct {
	fw     *Forwarder
	proxy  *Proxy
	socket string
	key    ed25519.PrivateKey

	mu     sync.Mutex
	events []string
}

const sandboxID = "sb-test1"

// startChain starts a chain; mods change the proxy's options and the
// sandbox's grant before the proxy is made.
func startChain(t testing.TB, allow []string, names map[string]string, mods ...func(*ProxyOptions, *Grant)) *chain {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	list, err := allowlist.ParseList(allow)
	if err != nil {
		t.Fatal(err)
	}
	ch := &chain{key: key, socket: filepath.Join(t.TempDir(), "hub.sock")}
	grant := Grant{Key: pub, Allow: list}
	o := ProxyOptions{
		Lookup: func(_ context.Context, id string) (Grant, error) {
			if id != sandboxID {
				return Grant{}, ErrUnknownSandbox
			}
			return grant, nil
		},
		Dial: func(ctx context.Context, host string, port int) (net.Conn, error) {
			addr, ok := names[fmt.Sprintf("%s:%d", host, port)]
			if !ok {
				return nil, errors.New("no such host in the test")
			}
			if addr == "private" {
				return nil, &AddressError{Host: host, Addr: netip.MustParseAddr("10.0.0.5"), Why: "private"}
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
		Record: func(_ context.Context, ev Event) {
			s := fmt.Sprintf("%s %s allowed=%v", ev.Sandbox, ev.Target, ev.Allowed)
			if ev.Err != nil {
				s += " err=" + ev.Err.Error()
			}
			if len(ev.Brokered) > 0 {
				s += " brokered=" + strings.Join(ev.Brokered, ",")
			}
			ch.mu.Lock()
			ch.events = append(ch.events, s)
			ch.mu.Unlock()
		},
		Logger: zaptest.NewLogger(t),
	}
	for _, m := range mods {
		m(&o, &grant)
	}
	ch.proxy, err = NewProxy(o)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", ch.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ch.proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = ch.proxy.Close()
	})

	ch.fw, err = Listen(ForwarderOptions{Listen: "127.0.0.1:0", HubSocket: ch.socket, SandboxID: sandboxID, Key: key,
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ch.fw.Serve(context.Background()) }()
	t.Cleanup(func() {
		_ = ch.fw.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ch
}

func (ch *chain) takeEvents() []string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ev := ch.events
	ch.events = nil
	return ev
}

// client is an HTTP client that uses the chain's forwarder for every URL.
func (ch *chain) client() *http.Client {
	u := &url.URL{Scheme: "http", Host: ch.fw.Addr().String()}
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(u),
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the test server's own certificate
		DisableKeepAlives: true,
	}}
}

func get(t *testing.T, c *http.Client, u string) (int, string, error) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Through the forwarder and the hub's proxy: https (CONNECT) and plain http
// reach the allowed hosts; other hosts, other ports and private addresses
// are refused with a 403 naming the allow list; each is recorded.
func TestChain(t *testing.T) {
	t.Parallel()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %s %s", r.Host, r.URL.Path)
	}))
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain %s %s %s", r.Method, r.Host, r.URL.RequestURI())
	}))
	defer plainSrv.Close()
	ch := startChain(t, []string{"api.example.com", "plain.example.com:80", "*.internal.example.com"}, map[string]string{
		"api.example.com:443":         tlsSrv.Listener.Addr().String(),
		"plain.example.com:80":        plainSrv.Listener.Addr().String(),
		"db.internal.example.com:443": "private",
	})
	c := ch.client()

	for _, tc := range []struct {
		url      string
		code     int
		body     string // the start of it
		event    string
		clientOK bool // the client gets a response (not an error)
	}{
		{"https://api.example.com/v1/x", 200, "tls api.example.com /v1/x", sandboxID + " api.example.com:443 allowed=true", true},
		{"http://plain.example.com/a?b=c", 200, "plain GET plain.example.com /a?b=c", sandboxID + " plain.example.com:80 allowed=true", true},
		{"http://evil.example.com/", 403,
			"agentd egress proxy: evil.example.com:80 is not on this sandbox's allow list (api.example.com:443, plain.example.com:80, *.internal.example.com:443); " + DeniedHint + "\n",
			sandboxID + " evil.example.com:80 allowed=false err=evil.example.com:80 is not on this sandbox's allow list (api.example.com:443, plain.example.com:80, *.internal.example.com:443)", true},
		{"http://api.example.com/", 403, "agentd egress proxy: api.example.com:80 is not on this sandbox's allow list", "", true},
		{"https://evil.example.com/", 0, "", sandboxID + " evil.example.com:443 allowed=false", false},
		{"https://db.internal.example.com/", 0, "", sandboxID + " db.internal.example.com:443 allowed=false err=db.internal.example.com resolves to 10.0.0.5, an address sandboxes may not reach (private)", false},
	} {
		code, body, err := get(t, c, tc.url)
		switch {
		case tc.clientOK && err != nil:
			t.Errorf("GET %s: %v", tc.url, err)
		case !tc.clientOK && err == nil:
			t.Errorf("GET %s = %d %q; want the client's CONNECT error", tc.url, code, body)
		case tc.clientOK && (code != tc.code || !strings.HasPrefix(body, tc.body)):
			t.Errorf("GET %s = %d %q; want %d %q…", tc.url, code, body, tc.code, tc.body)
		}
		ev := ch.takeEvents()
		if len(ev) != 1 || !strings.HasPrefix(ev[0], tc.event) {
			t.Errorf("GET %s recorded %q; want one event starting %q", tc.url, ev, tc.event)
		}
	}

	// A refused CONNECT, raw: the 403 and its body reach the client.
	conn, err := net.Dial("tcp", ch.fw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT evil.example.com:443 HTTP/1.1\r\nHost: evil.example.com:443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || string(b) != "agentd egress proxy: evil.example.com:443 is not on this sandbox's allow list (api.example.com:443, plain.example.com:80, *.internal.example.com:443); "+DeniedHint+"\n" {
		t.Errorf("raw CONNECT: %d %q", resp.StatusCode, b)
	}
	ch.takeEvents()
}

// The hub's socket refuses what does not prove the sandbox: no headers, a
// wrong key, a stale time, an unknown id, another target than signed; none
// is recorded.
func TestProxyAuthentication(t *testing.T) {
	t.Parallel()
	ch := startChain(t, []string{"api.example.com"}, nil)
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	for _, tc := range []struct {
		name   string
		header func(h http.Header)
	}{
		{"no headers", func(http.Header) {}},
		{"wrong key", func(h http.Header) { sign(h, sandboxID, "api.example.com:443", otherKey, now) }},
		{"stale", func(h http.Header) { sign(h, sandboxID, "api.example.com:443", ch.key, now.Add(-2*MaxSkew)) }},
		{"future", func(h http.Header) { sign(h, sandboxID, "api.example.com:443", ch.key, now.Add(2*MaxSkew)) }},
		{"unknown id", func(h http.Header) { sign(h, "sb-other", "api.example.com:443", ch.key, now) }},
		{"other target", func(h http.Header) { sign(h, sandboxID, "evil.example.com:443", ch.key, now) }},
	} {
		conn, err := net.Dial("unix", ch.socket)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		tc.header(h)
		var b strings.Builder
		b.WriteString("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n")
		_ = h.Write(&b)
		b.WriteString("\r\n")
		_, _ = io.WriteString(conn, b.String())
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(body), "does not prove a sandbox") {
			t.Errorf("%s: %d %q; want 403", tc.name, resp.StatusCode, body)
		}
	}
	if ev := ch.takeEvents(); len(ev) != 0 {
		t.Errorf("recorded %q", ev)
	}
}

// Bad requests to the forwarder get a 400 saying what it takes.
func TestForwarderBadRequests(t *testing.T) {
	t.Parallel()
	ch := startChain(t, []string{"api.example.com"}, nil)
	for _, tc := range []struct{ req, want string }{
		{"GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "send absolute URLs"},
		{"GET https://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "https URLs go through CONNECT"},
		{"CONNECT api.example.com HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "want host:port"},
		{"NONSENSE\r\n\r\n", "could not read the request"},
	} {
		conn, err := net.Dial("tcp", ch.fw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, tc.req)
		b, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 400 ") || !strings.Contains(string(b), tc.want) {
			t.Errorf("%q: %q; want a 400 saying %q", tc.req, b, tc.want)
		}
	}
	if ev := ch.takeEvents(); len(ev) != 0 {
		t.Errorf("recorded %q", ev)
	}
}

// A tunnel carries bytes both ways, half closes included, and the proxy's
// Close ends a live one.
func TestTunnelBytesAndClose(t *testing.T) {
	t.Parallel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c) // echo until the client half-closes
			}()
		}
	}()
	ch := startChain(t, []string{"echo.example.com:7"}, map[string]string{"echo.example.com:7": echo.Addr().String()})
	open := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", ch.fw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "CONNECT echo.example.com:7 HTTP/1.1\r\nHost: echo.example.com:7\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return conn, br
	}
	conn, br := open()
	payload := strings.Repeat("0123456789", 100000)
	go func() {
		_, _ = io.WriteString(conn, payload)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(br)
	conn.Close()
	if err != nil || len(got) != len(payload) || string(got) != payload {
		t.Errorf("echoed %d bytes (%v), want %d", len(got), err, len(payload))
	}

	conn, br = open()
	defer conn.Close()
	_, _ = io.WriteString(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	_ = ch.proxy.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Error("the tunnel outlived the proxy's Close")
	}
	if diff := cmp.Diff(ch.takeEvents(), []string{sandboxID + " echo.example.com:7 allowed=true", sandboxID + " echo.example.com:7 allowed=true"}); diff != "" {
		t.Errorf("events (-got +want):\n%s", diff)
	}
}

// What the proxy answers before it looks at the allow list: only CONNECT,
// a target with a port, and a sandbox it could look up (a store that
// fails is a 503 to retry, not a refusal).
func TestProxyRefusesEarly(t *testing.T) {
	t.Parallel()
	p, err := NewProxy(ProxyOptions{Lookup: func(context.Context, string) (Grant, error) { return Grant{}, errors.New("store down") }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct {
		method, target string
		code           int
		body           string
	}{
		{http.MethodGet, "/", 405, "only CONNECT host:port"},
		{http.MethodConnect, "api.example.com:0", 400, "want host:port with a port from 1 to 65535"},
		{http.MethodConnect, "api.example.com:443", 503, "could not check this sandbox just now"},
	} {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s %s = %d %q; want %d %q", tc.method, tc.target, w.Code, w.Body.String(), tc.code, tc.body)
		}
	}
	if _, err := NewProxy(ProxyOptions{}); err == nil {
		t.Error("NewProxy without Lookup succeeded")
	}
}
