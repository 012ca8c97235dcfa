package orgca

import (
	"errors"
	"os"
)

// rootFiles are where Linux distributions keep the system's roots, in the
// order Go's crypto/x509 looks.
var rootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine, macOS
}

// SystemRootsPEM is the hub host's root certificates, PEM: the file
// SSL_CERT_FILE names, else the distribution's bundle. It goes into the
// trust bundle of sandboxes with brokered credentials, beside the org's
// CA.
func SystemRootsPEM() ([]byte, error) {
	files := rootFiles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("no system root certificates found (set SSL_CERT_FILE)")
}
