package agentd

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/egressproxy"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// SandboxSecretsDir is where a sandbox's agentd reads the variables its
// hub delivers (an agent run's secrets; see wire.SandboxSecretsDir).
const SandboxSecretsDir = wire.SandboxSecretsDir

// secretEnv reads the variables in dir: each regular file NAME sets NAME to
// its content less one trailing newline. Anything else there (a missing
// dir, other files, AGENTD_* names, which the runner drops too) sets
// nothing.
func secretEnv(dir string) map[string]string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make(map[string]string, len(ents))
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !wire.ValidSecretName(name) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) > wire.MaxSecretBytes || strings.IndexByte(string(b), 0) >= 0 {
			continue
		}
		out[name] = strings.TrimSuffix(string(b), "\n")
	}
	return out
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
// loopback): each connection goes to the hub's socket, signed with the
// sandbox's key, and the hub decides. stop closes it and waits.
func serveEgress(ctx context.Context, c *SandboxCredential, log *zap.Logger) (stop func(), err error) {
	u, err := url.Parse(c.Hub)
	if err != nil || u.Scheme != "unix" {
		return nil, fmt.Errorf("egress proxy: the hub %q is not a unix socket", c.Hub)
	}
	fw, err := egressproxy.Listen(egressproxy.ForwarderOptions{
		Listen: c.Egress, HubSocket: u.Path, SandboxID: c.ID, Key: c.Key, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fw.Serve(ctx); err != nil {
			log.Error("egress proxy stopped", zap.Error(err))
		}
	}()
	log.Info("egress proxy", zap.String("listen", c.Egress))
	return func() {
		_ = fw.Close()
		<-done
	}, nil
}
