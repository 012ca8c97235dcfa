package agentd

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/allowlist"
	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/orgca"
)

// tlsEgressHub is the hub's end of the sandboxes' egress proxy on a TLS
// listener on loopback, as the hub serves it on --sandbox-listen: its
// certificate from a CA of the hub's own (orgca, as the tunnel CA), the
// proxy's check of each request against the sandbox it names.
type tlsEgressHub struct {
	addr   string
	caFile string // the CA's certificate, as the hub gives it to a sandbox
}

func startTLSEgressHub(t *testing.T, grants map[string]egressproxy.Grant, upstream string) tlsEgressHub {
	t.Helper()
	certPEM, keyPEM, err := orgca.Generate("sandbox tunnel", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := orgca.Parse(certPEM, keyPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "hub-ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	proxy, err := egressproxy.NewProxy(egressproxy.ProxyOptions{
		Lookup: func(_ context.Context, id string) (egressproxy.Grant, error) {
			g, ok := grants[id]
			if !ok {
				return egressproxy.Grant{}, egressproxy.ErrUnknownSandbox
			}
			return g, nil
		},
		// Every allowed name is the test's server on loopback.
		Dial: func(ctx context.Context, _ string, _ int) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", upstream)
		},
		Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(tls.NewListener(lis, &tls.Config{MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.Leaf("127.0.0.1") }}))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
		_ = proxy.Close()
	})
	return tlsEgressHub{addr: lis.Addr().String(), caFile: caFile}
}

// A sandbox whose agentd dials its hub over the network (wss://, the hub's
// CA beside its key: a Pod on Kubernetes with the init container) has an
// egress proxy too: Run's tunnel transport carries each CONNECT over TLS
// to the hub, verified with the CA the hub pinned, and the hub checks the
// allow list of the sandbox that signed it. Allowed: through; not on the
// list: the hub's 403 naming it; a sandbox's key used for another
// sandbox's id, or an id the hub gives no grant (a machine's): refused as
// unproven; a hub whose certificate is not from the pinned CA: not
// reached at all.
func TestSandboxEgressOverTLS(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", r.Host)
	}))
	defer upstream.Close()
	list, err := allowlist.ParseList([]string{"allowed.example.com:80"})
	if err != nil {
		t.Fatal(err)
	}
	pubA, keyA, _ := ed25519.GenerateKey(rand.Reader)
	pubB, keyB, _ := ed25519.GenerateKey(rand.Reader)
	_, machineKey, _ := ed25519.GenerateKey(rand.Reader)
	hub := startTLSEgressHub(t, map[string]egressproxy.Grant{
		"sb-a": {Key: pubA, Allow: list},
		"sb-b": {Key: pubB, Allow: list},
	}, upstream.Listener.Addr().String())
	otherHub := startTLSEgressHub(t, map[string]egressproxy.Grant{"sb-a": {Key: pubA, Allow: list}}, upstream.Listener.Addr().String())

	const (
		allowed     = "hello from allowed.example.com\n"
		notOnList   = "agentd egress proxy: denied.example.com:80 is not on this sandbox's allow list (allowed.example.com:80)"
		unproven    = "agentd egress proxy: the request does not prove a sandbox of this hub\n"
		unreachable = "agentd egress proxy: the hub is unreachable: dial hub: tls: failed to verify certificate: x509: certificate signed by unknown authority"
	)
	for _, tc := range []struct {
		name   string
		id     string
		key    ed25519.PrivateKey
		caFile string // "": the hub's own
		url    string
		code   int
		prefix string
	}{
		{"allowed", "sb-a", keyA, "", "http://allowed.example.com/x", http.StatusOK, allowed},
		{"sandbox b, allowed", "sb-b", keyB, "", "http://allowed.example.com/x", http.StatusOK, allowed},
		{"not on the list", "sb-a", keyA, "", "http://denied.example.com/", http.StatusForbidden, notOnList},
		{"a's key as sandbox b", "sb-b", keyA, "", "http://allowed.example.com/x", http.StatusForbidden, unproven},
		{"a machine's id and key", "m-1", machineKey, "", "http://allowed.example.com/x", http.StatusForbidden, unproven},
		{"another hub's CA", "sb-a", keyA, otherHub.caFile, "http://allowed.example.com/x", http.StatusBadGateway, unreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := tc.caFile
			if ca == "" {
				ca = hub.caFile
			}
			c := &SandboxCredential{Hub: "wss://" + hub.addr, ID: tc.id, Key: tc.key, CAFile: ca, Egress: "127.0.0.1:0"}
			o := RunOptions{Sandbox: c}
			m, key, _, err := pairing(o)
			if err != nil {
				t.Fatal(err)
			}
			log := zaptest.NewLogger(t)
			tun, err := listenTunnel(m, key, o, log) // Run's tunnel, not dialled: DialHub only
			if err != nil {
				t.Fatal(err)
			}
			defer tun.Close()
			addr, stop, err := serveEgress(t.Context(), c, tun.DialHub, log)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			client := &http.Client{Transport: &http.Transport{
				Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: addr.String()}),
				DisableKeepAlives: true,
			}}
			resp, err := client.Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.HasPrefix(string(body), tc.prefix) {
				t.Errorf("GET %s as %s: %d %q; want %d %q…", tc.url, tc.id, resp.StatusCode, body, tc.code, tc.prefix)
			}
		})
	}
}
