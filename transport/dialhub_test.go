package transport_test

import (
	"bufio"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/devdepot-ai/agentd/transport"
)

// echoOnce serves lis: each connection gets back the first line it sends,
// prefixed with what kind of connection it was.
func echoOnce(t *testing.T, lis net.Listener) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			kind := "plain"
			if tc, ok := c.(*tls.Conn); ok {
				if tc.Handshake() != nil {
					c.Close()
					continue
				}
				kind = "tls"
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = io.WriteString(c, kind+" "+line)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-done
	})
}

// DialHub reaches the endpoint the tunnel dials, with the tunnel's TLS:
// a wss:// hub with the pinned CA over TLS, verified (another CA's pool
// fails the handshake), a unix:// hub on its socket.
func TestDialHub(t *testing.T) {
	t.Parallel()
	pool, srvTLS := testCA(t)
	other, _ := testCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoOnce(t, tls.NewListener(lis, srvTLS))
	sock := filepath.Join(t.TempDir(), "hub.sock")
	ulis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	echoOnce(t, ulis)
	_, key, _ := ed25519.GenerateKey(nil)
	for _, tc := range []struct {
		name, hub string
		roots     *x509.CertPool
		want      string // the echo; "" for a refused handshake
	}{
		{"wss, the pinned CA", "wss://" + lis.Addr().String(), pool, "tls hi\n"},
		{"wss, another CA", "wss://" + lis.Addr().String(), other, ""},
		{"unix socket", "unix://" + sock, nil, "plain hi\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tun, err := transport.Listen(transport.Options{HubURL: tc.hub, MachineID: "sb-x", Key: key, RootCAs: tc.roots})
			if err != nil {
				t.Fatal(err)
			}
			defer tun.Close()
			c, err := tun.DialHub(t.Context())
			if tc.want == "" {
				var uerr x509.UnknownAuthorityError
				if !errors.As(err, &uerr) {
					t.Fatalf("DialHub = %v; want the certificate refused (unknown authority)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "hi\n"); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != tc.want {
				t.Errorf("through DialHub: %q %v; want %q", got, err, tc.want)
			}
		})
	}
}
