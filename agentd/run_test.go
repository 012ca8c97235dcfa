package agentd

import (
	"context"
	"crypto/ed25519"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/devdepot-ai/agentd/transport"
)

// TestRunTunnelLoggerName checks that Run's tunnel logs under
// "agentd.tunnel", named once: Run used to name the logger "tunnel" and
// transport.Listen named it again ("agentd.tunnel.tunnel").
func TestRunTunnelLoggerName(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: every dial fails and is logged.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := "http://" + lis.Addr().String()
	lis.Close()

	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const msg = "cannot open the tunnel to the hub"
	names := make(chan string, 1)
	core, _ := observer.New(zapcore.InfoLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == msg {
			select {
			case names <- e.LoggerName:
			default:
			}
		}
		return nil
	})).Named("agentd")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			Server:  Options{Workspace: ws, StateDir: filepath.Join(dir, "state"), Env: os.Environ(), Logger: log},
			Socket:  "-",
			Backoff: transport.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond},
			Sandbox: &SandboxCredential{Hub: hub, ID: "m-test", Key: key},
		})
	}()
	select {
	case name := <-names:
		if name != "agentd.tunnel" {
			t.Errorf("the tunnel logs under %q, want \"agentd.tunnel\"", name)
		}
	case err := <-done:
		t.Fatalf("Run returned before the tunnel logged: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the tunnel logged no failed dial within 30 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
