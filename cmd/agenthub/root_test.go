package main

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
)

func TestParseProxies(t *testing.T) {
	t.Parallel()
	got, err := parseProxies([]string{"10.0.0.0/8", "192.0.2.7", "2001:db8::1", "10.1.2.3/16", "::ffff:192.0.2.8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::1/128"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("192.0.2.8/32"),
	}
	if diff := cmp.Diff(got, want, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("parseProxies (-got +want):\n%s", diff)
	}
	for _, bad := range []string{"", "nginx", "10.0.0.0/33", "10.0.0.1:80"} {
		if _, err := parseProxies([]string{bad}); err == nil {
			t.Errorf("parseProxies(%q) accepted it", bad)
		}
	}
}

// TestAllowRegistryRefused: --allow-registry entries that cover a public
// suffix, or are not hosts, are a usage error before the engine is asked.
func TestAllowRegistryRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ entry, want string }{
		{"*.co.uk", "public suffix"},
		{"co.uk", "public suffix"},
		{"*.com", "top-level domain"},
		{"ghcr.io/acme", "want a host"},
	} {
		f := sandboxFlags{mode: "on", driver: driverDocker, allow: []string{tc.entry}}
		_, closeFn, err := f.options(t.Context(), "", zap.NewNop())
		closeFn()
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--allow-registry %s: got %v, want a usage error containing %q", tc.entry, err, tc.want)
		}
	}
}

// TestServeActivityKeepBytes: a byte budget that is not a size, or too
// small to keep anything, is a usage error before anything is opened.
func TestServeActivityKeepBytes(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"lots", "-5", "1K", "0"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "hub.db")
			_, _, err := runAgenthub(t, "", "serve", "--listen", "127.0.0.1:0", "--db", db, "--activity-keep-bytes", v)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--activity-keep-bytes") {
				t.Fatalf("serve --activity-keep-bytes %s = %v, want a usage error naming the flag", v, err)
			}
			if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the database was made (%v)", err)
			}
		})
	}
}

// --preview-listen off loopback without TLS is a usage error that makes
// nothing; previewBase names the listener as a person reaches it.
func TestServePreviewListen(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "hub.db")
	_, _, err := runAgenthub(t, "", "serve", "--listen", "127.0.0.1:0", "--db", db, "--preview-listen", "0.0.0.0:0")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--preview-listen 0.0.0.0:0 is reachable from other machines") {
		t.Fatalf("serve --preview-listen 0.0.0.0:0 = %v, want a usage error naming the flag", err)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the database was made (%v)", err)
	}
	for _, tc := range []struct {
		addr, public string
		tls          bool
		want         string
	}{
		{"127.0.0.1:8444", "", false, "http://127.0.0.1:8444"},
		{"0.0.0.0:8444", "", true, "https://localhost:8444"},
		{"[::]:8444", "https://hub.example.com", true, "https://hub.example.com:8444"},
	} {
		ap := netip.MustParseAddrPort(tc.addr)
		got := previewBase(net.TCPAddrFromAddrPort(ap), tc.public, tc.tls)
		if got != tc.want {
			t.Errorf("previewBase(%s, %q, %v) = %q, want %q", tc.addr, tc.public, tc.tls, got, tc.want)
		}
	}
}

// A bad --preview-domain is a usage error that makes nothing;
// previewDomainURL takes the scheme and port of --public-url, else of
// the listener.
func TestServePreviewDomain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ domain, public, want string }{
		{"*.preview.example.com", "", "no *., scheme or port"},
		{"https://preview.example.com", "", "no *., scheme or port"},
		{"preview.example.com:8443", "", "no *., scheme or port"},
		{"pre_view.example.com", "", "not a DNS name"},
		{"example.com", "https://hub.example.com", "the hub's own host hub.example.com is under it"},
	} {
		t.Run(tc.domain, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "hub.db")
			args := []string{"serve", "--listen", "127.0.0.1:0", "--db", db, "--preview-domain", tc.domain}
			if tc.public != "" {
				args = append(args, "--public-url", tc.public)
			}
			_, _, err := runAgenthub(t, "", args...)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--preview-domain") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve --preview-domain %s = %v, want a usage error saying %q", tc.domain, err, tc.want)
			}
			if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the database was made (%v)", err)
			}
		})
	}
	for _, tc := range []struct {
		domain, public string
		tls            bool
		port           int
		want           string
	}{
		{"Preview.Test.", "", false, 8080, "http://preview.test:8080"},
		{"preview.example.com", "", true, 443, "https://preview.example.com"},
		{"preview.example.com", "https://hub.example.com", false, 8080, "https://preview.example.com"},
		{"preview.example.com", "https://hub.example.com:8443", true, 8443, "https://preview.example.com:8443"},
		{"", "https://hub.example.com", true, 443, ""},
	} {
		got, err := previewDomainURL(tc.domain, tc.public, tc.tls, tc.port)
		if err != nil || got != tc.want {
			t.Errorf("previewDomainURL(%q, %q, %v, %d) = %q, %v; want %q", tc.domain, tc.public, tc.tls, tc.port, got, err, tc.want)
		}
	}
}
