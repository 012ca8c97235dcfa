package egressproxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestInterceptUpgrade: an upgrade (as a websocket's) through a brokered
// host carries the header on its request, then bytes both ways until the
// client is done.
func TestInterceptUpgrade(t *testing.T) {
	t.Parallel()
	org, public := newCA(t), newCA(t)
	api := tlsUpstream(t, public, "api.example.com", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Saw: %s\r\n\r\n", r.Header.Get("Authorization"))
		_ = rw.Flush()
		_, _ = io.Copy(c, rw) // echo until the client closes
	}))
	ch := startChain(t, []string{"api.example.com"}, map[string]string{"api.example.com:443": api.Listener.Addr().String()},
		func(o *ProxyOptions, g *Grant) {
			o.UpstreamRoots = pool(public)
			g.Leaf = org.Leaf
			g.Inject = []Inject{{Host: "api.example.com", Port: 443, Header: "Authorization", Value: []byte("Bearer sk-ws")}}
		})
	raw, err := net.Dial("tcp", ch.fw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
	br := bufio.NewReader(raw)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "api.example.com", RootCAs: pool(org)})
	fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\nConnection: Upgrade\r\nUpgrade: echo\r\nAuthorization: Bearer agentd-fake\r\n\r\n")
	tr := bufio.NewReader(tc)
	resp, err := http.ReadResponse(tr, &http.Request{Method: http.MethodGet})
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Saw") != "Bearer sk-ws" {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	for _, msg := range []string{"ping\n", "pong pong\n"} {
		if _, err := io.WriteString(tc, msg); err != nil {
			t.Fatal(err)
		}
		got, err := tr.ReadString('\n')
		if err != nil || got != msg {
			t.Errorf("echo of %q: %q %v", strings.TrimSpace(msg), got, err)
		}
	}
}
