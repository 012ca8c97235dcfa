package sandboxes

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The tunnel's CA is made once and reused across restarts (a sandbox
// started before a restart still trusts the hub after it), its key kept
// 0600; the listener's leaf names the advertised host and verifies
// against the CA alone.
func TestTunnelCAReusedAndLeafVerifies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	first, err := tunnelCA(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	again, err := tunnelCA(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if string(first.CertPEM()) != string(again.CertPEM()) {
		t.Error("a second start made a new CA; want the one on disk")
	}
	if st, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the CA key: %v, %v; want mode 0600", st, err)
	}
	for _, adv := range []string{"10.213.0.1:7443", "hub-0.agenthub.ns.svc:7443"} {
		cfg, err := tunnelTLS(again, adv)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(first.Certificate())
		host, _, _ := net.SplitHostPort(adv)
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("leaf for %s: %v", adv, err)
		}
	}
	if _, err := tunnelTLS(again, "no-port"); err == nil {
		t.Error("an advertise address without a port was taken")
	}
}
