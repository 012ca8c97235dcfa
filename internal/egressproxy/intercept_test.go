package egressproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/orgca"
)

// newCA is a CA of package orgca, which here also plays the public CAs
// that sign the real hosts' certificates.
func newCA(t testing.TB) *orgca.CA {
	t.Helper()
	c, k, err := orgca.Generate("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := orgca.Parse(c, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// tlsUpstream serves h over TLS with a certificate for host signed by ca.
func tlsUpstream(t testing.TB, ca *orgca.CA, host string, h http.Handler) *httptest.Server {
	t.Helper()
	leaf, err := ca.Leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func pool(cas ...*orgca.CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Certificate())
	}
	return p
}

// TestInterceptInjectsHeader: for a host with an inject rule the sandbox's
// client talks TLS to the hub (a leaf of the org's CA, which it trusts),
// and the real host (verified against its own CA) receives exactly the
// rule's header in place of the one the client sent, on every request of
// the connection; a host without a rule is a plain tunnel (the client sees
// the host's own certificate and its own header); a real host whose
// certificate does not verify gets nothing.
func TestInterceptInjectsHeader(t *testing.T) {
	t.Parallel()
	org, public, rogue := newCA(t), newCA(t), newCA(t)
	const secret = "Bearer sk-the-real-one"
	echo := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s host=%s path=%s auth=%q n=%d", name, r.Host, r.URL.Path, r.Header.Values("Authorization"), len(r.Header.Values("X-Api-Key")))
		})
	}
	api := tlsUpstream(t, public, "api.example.com", echo("api"))
	plain := tlsUpstream(t, public, "plain.example.com", echo("plain"))
	var badHits atomic.Int32
	bad := tlsUpstream(t, rogue, "bad.example.com", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		badHits.Add(1)
	}))
	addr := func(s *httptest.Server) string { return s.Listener.Addr().String() }
	ch := startChain(t, []string{"api.example.com", "plain.example.com", "bad.example.com"}, map[string]string{
		"api.example.com:443": addr(api), "plain.example.com:443": addr(plain), "bad.example.com:443": addr(bad),
	}, func(o *ProxyOptions, g *Grant) {
		o.UpstreamRoots = pool(public)
		g.Leaf = org.Leaf
		g.Inject = []Inject{
			{Host: "api.example.com", Port: 443, Header: "Authorization", Value: []byte(secret)},
			{Host: "bad.example.com", Port: 443, Header: "Authorization", Value: []byte(secret)},
		}
	})
	// The sandbox's client trusts the system's roots and the org's CA
	// (here: the public CA and the org's).
	proxyURL := &url.URL{Scheme: "http", Host: ch.fw.Addr().String()}
	var issuers []string
	c := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		TLSClientConfig: &tls.Config{RootCAs: pool(public, org), VerifyConnection: func(cs tls.ConnectionState) error {
			issuers = append(issuers, cs.PeerCertificates[0].Issuer.CommonName)
			return nil
		}},
	}}
	defer c.CloseIdleConnections()
	do := func(u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer agentd-brokered-placeholder")
		req.Header.Add("authorization", "Bearer second")
		req.Host = "evil.example.net" // the CONNECT's host wins
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	want := fmt.Sprintf("api host=api.example.com path=/v1/a auth=[%q] n=0", secret)
	for i := range 3 { // one connection, several requests
		if code, body := do("https://api.example.com/v1/a"); code != 200 || body != want {
			t.Errorf("request %d: %d %q, want 200 %q", i, code, body, want)
		}
	}
	if code, body := do("https://plain.example.com/p"); code != 200 || !strings.Contains(body, `auth=["Bearer agentd-brokered-placeholder" "Bearer second"]`) {
		t.Errorf("plain tunnel: %d %q", code, body)
	}
	if got, w := strings.Join(issuers, "|"), org.Certificate().Subject.CommonName+"|"+public.Certificate().Subject.CommonName; got != w {
		t.Errorf("the client saw certificates issued by %q, want %q (the org's CA for the brokered host, the host's own CA for the tunnel)", got, w)
	}
	code, body := do("https://bad.example.com/")
	if code != http.StatusBadGateway || !strings.Contains(body, "certificate") || badHits.Load() != 0 {
		t.Errorf("unverified upstream: %d %q, %d requests reached it", code, body, badHits.Load())
	}
	ev := strings.Join(ch.takeEvents(), "\n")
	for _, w := range []string{
		sandboxID + " api.example.com:443 allowed=true brokered=Authorization",
		sandboxID + " plain.example.com:443 allowed=true",
	} {
		if !strings.Contains(ev, w) {
			t.Errorf("events %q lack %q", ev, w)
		}
	}
	if strings.Contains(ev, "sk-the-real-one") {
		t.Errorf("an event holds the secret: %q", ev)
	}
}

// TestInterceptUntrustingClient: a client that does not trust the org's CA
// fails its handshake, and nothing reaches the real host.
func TestInterceptUntrustingClient(t *testing.T) {
	t.Parallel()
	org, public := newCA(t), newCA(t)
	var hits atomic.Int32
	api := tlsUpstream(t, public, "api.example.com", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	ch := startChain(t, []string{"api.example.com"}, map[string]string{"api.example.com:443": api.Listener.Addr().String()},
		func(o *ProxyOptions, g *Grant) {
			o.UpstreamRoots = pool(public)
			g.Leaf = org.Leaf
			g.Inject = []Inject{{Host: "api.example.com", Port: 443, Header: "X-Api-Key", Value: []byte("k")}}
		})
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: ch.fw.Addr().String()}),
		TLSClientConfig: &tls.Config{RootCAs: pool(public)}}}
	defer c.CloseIdleConnections()
	_, err := c.Get("https://api.example.com/")
	if err == nil || !strings.Contains(err.Error(), "certificate") || hits.Load() != 0 {
		t.Errorf("a client without the org's CA: %v, %d requests reached the host", err, hits.Load())
	}
}
