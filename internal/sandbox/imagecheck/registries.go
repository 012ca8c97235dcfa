package imagecheck

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devdepot-ai/agentd/internal/imageref"
)

// Registries is how the hub reaches registries its admin runs: agenthub
// serve --insecure-registry and --registry-ca, as Docker's daemon options
// of the same names mean them.
type Registries struct {
	// Insecure are the registries (host[:port], as written in an image
	// reference) spoken to in plain http when https does not answer. A
	// registry on a 127.0.0.0/8 or ::1 address is insecure without being
	// named, as Docker's 127.0.0.0/8 default; a name is never resolved to
	// decide (what localhost means is the admin's to say).
	Insecure []string
	// CAs are trusted for registries' certificates besides the system's
	// (nil: the system's alone).
	CAs *x509.CertPool
	// CAFile is the file CAs came from, for messages.
	CAFile string
}

// CheckInsecureRegistry checks one --insecure-registry entry: a registry
// host with an optional port, as an image reference names it.
func CheckInsecureRegistry(s string) error {
	if strings.Contains(s, "*") {
		return fmt.Errorf("%q: want a registry host[:port], without wildcards", s)
	}
	return imageref.CheckRegistryPattern(s)
}

// LoadCAs reads a PEM file of CA certificates for --registry-ca.
func LoadCAs(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--registry-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--registry-ca %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// IsInsecure reports whether host (host[:port]) is spoken to in plain
// http: named in Insecure, or a loopback address.
func (r Registries) IsInsecure(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && a.Unmap().IsLoopback() {
		return true
	}
	for _, s := range r.Insecure {
		if strings.EqualFold(s, host) {
			return true
		}
	}
	return false
}

// Transport is remote.DefaultTransport trusting CAs as well (nil CAs:
// remote.DefaultTransport itself).
func (r Registries) Transport() http.RoundTripper {
	if r.CAs == nil {
		return remote.DefaultTransport
	}
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: r.CAs, MinVersion: tls.VersionTLS12}
	return t
}

// Apply sets opts to reach registries as r says.
func (r Registries) Apply(opts *Options) {
	opts.Insecure = r.IsInsecure
	opts.Transport = r.Transport()
}

// registryHint is what a person can do about a registry error that the
// hub's flags address, or "".
func registryHint(host string, err error) string {
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	switch {
	case errors.As(err, &uerr) || strings.Contains(err.Error(), "certificate signed by unknown authority"):
		return fmt.Sprintf("%s's certificate is signed by an authority the hub does not trust: if the registry's certificate comes from your own CA, "+
			"give the hub that CA with --registry-ca FILE on agenthub serve", host)
	case errors.As(err, &herr):
		return fmt.Sprintf("%s's certificate is not for that name: fix the registry's certificate", host)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") || strings.Contains(err.Error(), "refused: only https"):
		return fmt.Sprintf("%s speaks plain http, not https: if you run that registry on a trusted network, let the hub use it with --insecure-registry %s on agenthub serve", host, host)
	}
	return ""
}
