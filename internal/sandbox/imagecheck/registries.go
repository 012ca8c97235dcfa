package imagecheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

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
	// Dial connects to a registry's address (tests: a resolver of their
	// own). Nil: the system's resolver and dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
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
	return r.named(host)
}

// Transport is remote.DefaultTransport trusting CAs as well (nil CAs:
// remote.DefaultTransport itself).
func (r Registries) Transport() http.RoundTripper {
	if r.CAs == nil && r.Dial == nil {
		return remote.DefaultTransport
	}
	t := remote.DefaultTransport.(*http.Transport).Clone()
	if r.CAs != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: r.CAs, MinVersion: tls.VersionTLS12}
	}
	if r.Dial != nil {
		t.DialContext = r.Dial
	}
	return t
}

// named reports whether host is one of Insecure.
func (r Registries) named(host string) bool {
	for _, s := range r.Insecure {
		if strings.EqualFold(s, host) {
			return true
		}
	}
	return false
}

// Fetch writes the image ref (repo@sha256:…, a linux/amd64 image
// manifest) as a docker load tarball tagged tag, read from its registry
// as r says, when the engine could not pull it itself: a registry named
// in Insecure, or any when CAs are set (false, nothing written: neither).
// go-containerregistry checks every blob and the manifest against their
// digests.
func (r Registries) Fetch(ctx context.Context, ref, tag string, w io.Writer) (bool, error) {
	dig, err := name.NewDigest(ref, name.StrictValidation)
	if err != nil {
		return false, nil
	}
	host := dig.Context().RegistryStr()
	if !r.named(host) && r.CAs == nil {
		return false, nil
	}
	opts := []name.Option{name.StrictValidation}
	if r.IsInsecure(host) {
		opts = append(opts, name.Insecure)
	}
	if dig, err = name.NewDigest(ref, opts...); err != nil {
		return true, err
	}
	t, err := name.NewTag(tag, opts...)
	if err != nil {
		return true, fmt.Errorf("tag %s: %w", tag, err)
	}
	img, err := remote.Image(dig, remote.WithContext(ctx), remote.WithAuth(authn.Anonymous),
		remote.WithTransport(httpsOnly{next: r.Transport(), insecure: r.IsInsecure}), remote.WithUserAgent("agenthub"))
	if err != nil {
		return true, fmt.Errorf("read %s: %w", ref, err)
	}
	if err := tarball.Write(t, img, w); err != nil {
		return true, fmt.Errorf("read %s: %w", ref, err)
	}
	return true, nil
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
