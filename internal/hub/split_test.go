package hub_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/devdepot-ai/agentd/internal/testca"
)

// One port serves gRPC (native transport) and HTTP (net/http), plaintext
// and TLS: whatever a client speaks reaches the server that answers it.
func TestOnePortServesEveryClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ca   *testca.CA
	}{
		{"plaintext", nil},
		{"tls", testca.New(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := startHubTLS(t, tc.ca)

			// gRPC: the health service through the hub's own port.
			resp, err := healthpb.NewHealthClient(h.conn()).Check(t.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("grpc health: %v, %v", resp, err)
			}

			// HTTP/1.1, and HTTP/2 where TLS lets the client ask for it.
			protos := map[string]*http.Transport{"HTTP/1.1": {}}
			if tc.ca != nil {
				protos["HTTP/1.1"].TLSClientConfig = &tls.Config{RootCAs: tc.ca.Pool, NextProtos: []string{"http/1.1"}}
				protos["HTTP/2.0"] = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tc.ca.Pool}, ForceAttemptHTTP2: true}
			}
			for want, tr := range protos {
				c := &http.Client{Transport: tr}
				r, err := c.Get(h.url + "/healthz")
				if err != nil {
					t.Fatalf("GET /healthz over %s: %v", want, err)
				}
				body, _ := io.ReadAll(r.Body)
				r.Body.Close()
				if r.StatusCode != http.StatusOK || string(body) != "ok\n" || r.Proto != want {
					t.Errorf("GET /healthz: %s %s %q, want 200 over %s", r.Proto, r.Status, body, want)
				}
				tr.CloseIdleConnections()
			}
		})
	}
}

// A plaintext connection that sends a few bytes of an HTTP/1.1 request and
// stops is not mistaken for HTTP/2; the request, once complete, is served.
func TestOnePortSlowHTTPClient(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, part := range []string{"P", "OST", " /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"} {
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(c, buf, 12)
	// POST is not a route for /healthz: net/http (not the gRPC server) answers 405.
	if got := string(buf[:n]); len(got) < 12 || got[:12] != "HTTP/1.1 405" {
		t.Fatalf("answer %q, want HTTP/1.1 405 from net/http", got)
	}
}

// A connection that never says what it speaks does not hold up the hub's
// shutdown for the classification timeout.
func TestShutdownWithSilentConnection(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	silent, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Connections are accepted in order: once a later one is answered, the
	// silent one is being classified.
	r, err := http.Get(h.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	start := time.Now()
	h.stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %s with a silent connection open, want well under the 10 s classification timeout", d)
	}
}
