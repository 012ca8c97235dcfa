package orgca

import (
	"crypto/x509"
	"testing"
	"time"
)

func newCA(t *testing.T, now func() time.Time) *CA {
	t.Helper()
	c, k, err := Generate("acme", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := Parse(c, k, now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestLeafVerifies: a leaf for a name and one for an IP verify against the
// CA alone, for their own name only, for server auth.
func TestLeafVerifies(t *testing.T) {
	t.Parallel()
	ca := newCA(t, nil)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	for _, host := range []string{"api.openai.com", "10.1.2.3"} {
		l, err := ca.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
		if _, err := l.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.example"}); err == nil {
			t.Errorf("%s's leaf verifies for other.example", host)
		}
		if _, err := l.Leaf.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), DNSName: host}); err == nil {
			t.Errorf("%s's leaf verifies without the org CA", host)
		}
	}
}

// TestLeafCached: the same host gets the same leaf until half its life is
// gone, then a new one; another org's CA signs nothing this one trusts.
func TestLeafCached(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := newCA(t, func() time.Time { return now })
	a, _ := ca.Leaf("API.example.com.")
	b, _ := ca.Leaf("api.example.com")
	if a != b {
		t.Error("the same host minted twice")
	}
	now = now.Add(LeafLifetime/2 + time.Minute)
	c, _ := ca.Leaf("api.example.com")
	if c == a {
		t.Error("a leaf past half its life was not minted again")
	}
	other := newCA(t, nil)
	roots := x509.NewCertPool()
	roots.AddCert(other.Certificate())
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "api.example.com", CurrentTime: now}); err == nil {
		t.Error("another org's CA trusts this org's leaf")
	}
}

// TestParseRefuses: a key that is not the certificate's, and garbage.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	c1, _, _ := Generate("a", time.Now())
	_, k2, _ := Generate("b", time.Now())
	if _, err := Parse(c1, k2, nil); err == nil {
		t.Error("a CA with another CA's key parsed")
	}
	if _, err := Parse([]byte("x"), []byte("y"), nil); err == nil {
		t.Error("garbage parsed")
	}
	ca := newCA(t, nil)
	if _, err := ca.Leaf(""); err == nil {
		t.Error("a leaf for no host")
	}
}

// Minting a leaf (a cache miss) and taking a cached one.
func BenchmarkLeafMint(b *testing.B) {
	c, k, _ := Generate("bench", time.Now())
	ca, _ := Parse(c, k, nil)
	for b.Loop() {
		if _, err := ca.mint("api.example.com", time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeafCached(b *testing.B) {
	c, k, _ := Generate("bench", time.Now())
	ca, _ := Parse(c, k, nil)
	for b.Loop() {
		if _, err := ca.Leaf("api.example.com"); err != nil {
			b.Fatal(err)
		}
	}
}
