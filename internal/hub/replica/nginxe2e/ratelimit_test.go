package nginxe2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"github.com/devdepot-ai/agentd/internal/wire"
)

// pairFrom posts a pairing request with code to nginx from the local
// address ip (any of 127.0.0.0/8) and returns the HTTP status.
func (c *cluster) pairFrom(t testing.TB, ip, code string) int {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(wire.PairRequest{Code: code, PublicKey: pub, Hostname: "box", OS: "linux", Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: &tls.Config{RootCAs: c.pki.pool(), MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.URL+wire.PairPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("pair from %s through nginx: %v", ip, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// testRateLimitPerClient: the replicas trust nginx's X-Forwarded-For, so
// the pairing rate limit (10 failed attempts a minute) counts per client
// address, across the replicas round robin spreads the attempts over: a
// client's eleventh is refused, another client's first is not. (Without
// --trusted-proxy every client would share nginx's bucket.)
func testRateLimitPerClient(t testing.TB, c *cluster) {
	const blind = "ABCD-EFGH"
	for i := range 10 {
		if got := c.pairFrom(t, "127.0.0.77", blind); got != http.StatusForbidden {
			t.Errorf("blind guess %d from 127.0.0.77: status %d, want 403", i+1, got)
		}
	}
	if got := c.pairFrom(t, "127.0.0.77", blind); got != http.StatusTooManyRequests {
		t.Errorf("11th guess from 127.0.0.77: status %d, want 429", got)
	}
	if got := c.pairFrom(t, "127.0.0.78", blind); got != http.StatusForbidden {
		t.Errorf("first guess from 127.0.0.78: status %d, want 403 (its own bucket)", got)
	}
}
