package hub_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/listen"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// unusedDriver is a sandbox driver the test never reaches: any call
// panics (its embedded interface is nil).
type unusedDriver struct{ sandbox.Driver }

// TestSandboxSocketServedByAnotherHub: a hub whose sandbox socket another
// live process serves fails to start with an error that calls that process
// another agenthub (errors.Is listen.ErrInUse, for agenthub to name its
// flags), and leaves the other's socket alone.
func TestSandboxSocketServedByAnotherHub(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, sandboxes.SandboxSocketName)
	other, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := hub.New(t.Context(), hub.Options{Store: st, Logger: zaptest.NewLogger(t), Sandboxes: sandboxes.Options{
		Driver: unusedDriver{}, AgentdDir: t.TempDir(), SocketDir: dir,
	}})
	if err == nil {
		srv.Close()
		t.Fatal("hub.New took a socket another process serves")
	}
	if !errors.Is(err, listen.ErrInUse) || !strings.Contains(err.Error(), "another agenthub is already serving") || strings.Contains(err.Error(), "agentd") {
		t.Errorf("hub.New: %v; want ErrInUse saying another agenthub serves %s", err, sock)
	}
	if !listen.Serving(sock) {
		t.Errorf("the other process's socket %s no longer answers", sock)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Errorf("the other process's socket: %v", err)
	}
}
