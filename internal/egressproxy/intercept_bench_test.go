package egressproxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// benchHTTPS runs GETs through the chain to an https server, brokered
// (an inject rule: two TLS handshakes, the header set) or tunnelled, on a
// new connection each (keepAlive false) or on one kept-alive connection.
func benchHTTPS(b *testing.B, brokered, keepAlive bool) {
	org, public := newCA(b), newCA(b)
	api := tlsUpstream(b, public, "api.example.com", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	ch := startChain(b, []string{"api.example.com"}, map[string]string{"api.example.com:443": api.Listener.Addr().String()},
		func(o *ProxyOptions, g *Grant) {
			o.UpstreamRoots = pool(public)
			if brokered {
				g.Leaf = org.Leaf
				g.Inject = []Inject{{Host: "api.example.com", Port: 443, Header: "Authorization", Value: []byte("Bearer sk-bench")}}
			}
		})
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: ch.fw.Addr().String()}),
		TLSClientConfig:   &tls.Config{RootCAs: pool(public, org)},
		DisableKeepAlives: !keepAlive,
	}}
	defer c.CloseIdleConnections()
	for b.Loop() {
		resp, err := c.Get("https://api.example.com/")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// A new connection per request: CONNECT, TLS and one GET.
func BenchmarkHTTPSTunnelNewConn(b *testing.B)   { benchHTTPS(b, false, false) }
func BenchmarkHTTPSBrokeredNewConn(b *testing.B) { benchHTTPS(b, true, false) }

// Requests on one kept-alive connection.
func BenchmarkHTTPSTunnelKeepAlive(b *testing.B)   { benchHTTPS(b, false, true) }
func BenchmarkHTTPSBrokeredKeepAlive(b *testing.B) { benchHTTPS(b, true, true) }
