package sandboxes

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/devdepot-ai/agentd/internal/orgca"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// The sandboxes' socket over TCP: for sandboxes that cannot mount the
// hub's unix socket (Pods on Kubernetes, on any node), the hub serves the
// same tunnel and egress proxy on Options.TunnelListener with TLS. The
// certificate is the hub's own: a CA kept in Options.TunnelCADir (made on
// first use, reused across restarts) signs a short-lived leaf for the
// advertised host; each sandbox gets the CA's certificate beside its key
// (hubCAFile) and trusts it alone. The listener admits sandbox ids only,
// as the socket does, and each sandbox's tunnel is bound to the advertised
// host it signed for.

// hubCAFile is the tunnel CA's certificate in a sandbox's key mount.
const hubCAFile = "hub-ca.pem"

// tunnelCA loads the tunnel's CA from dir, making it on first use.
func tunnelCA(dir string, now time.Time) (*orgca.CA, error) {
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	cert, cerr := os.ReadFile(certFile)
	key, kerr := os.ReadFile(keyFile)
	if errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist) {
		var err error
		if cert, key, err = orgca.Generate("sandbox tunnel", now); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox tunnel CA: %w", err)
		}
		// The key first: a certificate without it is a broken CA.
		if err := writeFileAtomic(keyFile, key, 0o600); err != nil {
			return nil, fmt.Errorf("sandbox tunnel CA: %w", err)
		}
		if err := writeFileAtomic(certFile, cert, 0o644); err != nil {
			return nil, fmt.Errorf("sandbox tunnel CA: %w", err)
		}
	} else if err := errors.Join(cerr, kerr); err != nil {
		return nil, fmt.Errorf("sandbox tunnel CA: %w", err)
	}
	ca, err := orgca.Parse(cert, key, nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox tunnel CA in %s: %w", dir, err)
	}
	return ca, nil
}

// writeFileAtomic writes data to file through a temporary file renamed
// into place.
func writeFileAtomic(file string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(mode), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// tunnelTLS is the listener's TLS configuration: a leaf for the advertised
// host, signed by ca (minted again before it expires).
func tunnelTLS(ca *orgca.CA, advertise string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(advertise)
	if err != nil {
		return nil, fmt.Errorf("sandbox tunnel address %q: want host:port: %w", advertise, err)
	}
	if _, err := ca.Leaf(host); err != nil { // a bad host fails now, not per handshake
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"}, // the tunnel is a websocket upgrade
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.Leaf(host) },
	}, nil
}

// tunnelEnv is what a sandbox that dials the TCP listener is given in
// place of the socket: the URL and the CA file, in its key mount.
func (m *Manager) tunnelEnv() []string {
	return []string{
		wire.EnvSandboxHub + "=wss://" + m.o.TunnelAdvertise,
		wire.EnvSandboxCAFile + "=" + sandbox.KeyDir + "/" + hubCAFile,
	}
}
