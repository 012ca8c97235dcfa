package replica

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// ErrNotReplica: the peer of an internal connection did not prove the
// replicas' key.
var ErrNotReplica = errors.New("peer is not a replica of this hub")

// TLSConfig returns the TLS configuration of the connections between
// replicas, for both ends: each side presents a certificate for the
// replicas' Ed25519 key and accepts only a peer that proves the same key.
// The key is derived from the hub's server secret, which every replica
// reads from the shared database: whoever can read the database is trusted
// already, and nothing needs to be configured or distributed. TLS 1.3 only.
func TLSConfig(secret []byte) (*tls.Config, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("replica TLS: server secret has %d bytes, want 32", len(secret))
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("agenthub replica key v1"))
	priv := ed25519.NewKeyFromSeed(mac.Sum(nil))
	pub := priv.Public().(ed25519.PublicKey)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "agenthub replica"},
		DNSNames:     []string{"agenthub-replica"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(100 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, fmt.Errorf("replica TLS: %w", err)
	}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return ErrNotReplica
		}
		cert, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNotReplica, err)
		}
		if k, ok := cert.PublicKey.(ed25519.PublicKey); !ok || !bytes.Equal(k, pub) {
			return ErrNotReplica
		}
		// The key is what is proved (TLS 1.3 signs the handshake with it);
		// the self-signature and dates of the peer's certificate add nothing.
		return cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}},
		ClientAuth:   tls.RequireAnyClientCert,
		// The peer is checked by key in VerifyPeerCertificate, not by a
		// CA and a name: replicas are reached by address.
		InsecureSkipVerify:    true, //nolint:gosec // verified by key below
		VerifyPeerCertificate: verify,
		ServerName:            "agenthub-replica",
	}, nil
}
