package agentd

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// SandboxSecretsDir is where a sandbox's agentd reads the variables its
// hub delivers (an agent run's secrets; see wire.SandboxSecretsDir).
const SandboxSecretsDir = wire.SandboxSecretsDir

// secretStore holds the variables the hub delivers by writing files into
// SecretsDir through FileService.Write: in memory only. Nothing on disk is
// read as a secret, so what the workload (same uid) drops into that
// directory never reaches a command's environment.
type secretStore struct {
	dir string // the clean, absolute SecretsDir

	mu   sync.Mutex
	vars map[string]string
}

func newSecretStore(dir string) *secretStore {
	return &secretStore{dir: filepath.Clean(dir), vars: map[string]string{}}
}

// name returns the variable a write to path sets, and whether path is in
// the secrets directory at all.
func (s *secretStore) name(path string) (string, bool) {
	if s == nil || !filepath.IsAbs(path) {
		return "", false
	}
	dir, name := filepath.Split(filepath.Clean(path))
	if filepath.Clean(dir) != s.dir {
		return "", false
	}
	return name, true
}

// set records a delivered variable: its value less one trailing newline.
func (s *secretStore) set(name string, value []byte) error {
	switch {
	case !wire.ValidSecretName(name):
		return invalidf("secret %q: not a name a secret may have (a variable name; never AGENTD_*, LD_*, PATH or others that change what programs run)", name)
	case len(value) > wire.MaxSecretBytes || strings.IndexByte(string(value), 0) >= 0:
		return invalidf("secret %s: the value is longer than %d bytes or holds a NUL byte", name, wire.MaxSecretBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vars[name] = strings.TrimSuffix(string(value), "\n")
	return nil
}

// env returns a copy of the delivered variables, for a command's start.
func (s *secretStore) env() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.vars)
}

// makeSandboxHome makes HOME when the hub put it in the workspace volume
// (an agent run's sandbox), where nothing made it yet; a HOME elsewhere is
// the sandbox's tmpfs, which exists.
func makeSandboxHome(home string) error {
	if !strings.HasPrefix(home, "/workspace/") {
		return nil
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("make HOME %s: %w", home, err)
	}
	return nil
}

// serveEgress serves the sandbox's egress proxy on c.Egress (its
// loopback): each connection goes to the hub on dial (the tunnel's
// transport: the hub's unix socket, or TLS to its sandbox listener with
// the CA it pinned), signed with the sandbox's key, and the hub decides.
// addr is where it listens; stop closes it and waits.
func serveEgress(ctx context.Context, c *SandboxCredential, dial func(context.Context) (net.Conn, error), log *zap.Logger) (addr net.Addr, stop func(), err error) {
	fw, err := egressproxy.Listen(egressproxy.ForwarderOptions{
		Listen: c.Egress, Dial: dial, SandboxID: c.ID, Key: c.Key, Logger: log,
	})
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fw.Serve(ctx); err != nil {
			log.Error("egress proxy stopped", zap.Error(err))
		}
	}()
	log.Info("egress proxy", zap.String("listen", fw.Addr().String()))
	return fw.Addr(), func() {
		_ = fw.Close()
		<-done
	}, nil
}
