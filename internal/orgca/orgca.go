package orgca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Lifetimes of what the CA signs.
const (
	// CALifetime is how long an org's CA is valid.
	CALifetime = 10 * 365 * 24 * time.Hour
	// LeafLifetime is how long a minted leaf is valid; a cached leaf is
	// minted again once less than half of it is left.
	LeafLifetime = 7 * 24 * time.Hour
	// maxLeaves bounds the cache (a sandbox could ask for many hosts,
	// though only hosts with inject rules are minted).
	maxLeaves = 4096
)

// ErrInvalid: a PEM block, certificate or key is not what an org CA is.
var ErrInvalid = errors.New("invalid org CA")

// Generate makes a new CA for org: its certificate and its PKCS #8 key,
// both PEM.
func Generate(org string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("org CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"agentd"}, CommonName: "agentd broker CA " + trim(org, 40)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("org CA certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("org CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// CA signs leaf certificates for hosts. Its methods may be called
// concurrently.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	now     func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// Parse reads a CA made by Generate. now is its clock (nil: time.Now).
func Parse(certPEM, keyPEM []byte, now func() time.Time) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || cb.Type != "CERTIFICATE" || kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: want a PEM CERTIFICATE and a PEM PRIVATE KEY", ErrInvalid)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: the key is not the certificate's, or the certificate is no CA", ErrInvalid)
	}
	if now == nil {
		now = time.Now
	}
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(cb), key: key, now: now, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA's certificate, for the sandboxes' trust bundle.
func (c *CA) CertPEM() []byte { return c.certPEM }

// Certificate is the CA's parsed certificate.
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// Leaf returns a certificate for host (a DNS name or an IP address) signed
// by the CA: the cached one while more than half its life is left, else a
// new one.
func (c *CA) Leaf(host string) (*tls.Certificate, error) {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" || len(host) > 253 {
		return nil, fmt.Errorf("leaf certificate for %q: not a host name", trim(host, 80))
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leaves[host]; ok && l.Leaf.NotAfter.Sub(now) > LeafLifetime/2 {
		return l, nil
	}
	l, err := c.mint(host, now)
	if err != nil {
		return nil, err
	}
	if len(c.leaves) >= maxLeaves {
		for k := range c.leaves { // any one: the map's order is random
			delete(c.leaves, k)
			break
		}
	}
	c.leaves[host] = l
	return l, nil
}

// mint signs a new leaf for host.
func (c *CA) mint(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(LeafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
