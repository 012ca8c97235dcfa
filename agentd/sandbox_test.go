package agentd

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Variables written into SecretsDir through FileService.Write (as the hub
// delivers them) reach every later command, and only those: a file the
// workload drops there on disk sets nothing, LD_PRELOAD, PATH and AGENTD_*
// are refused, the caller's own variables win, and no value is on disk.
func TestSecretsDirReachesCommands(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "secrets")
	ts := newTestServer(t, Options{SecretsDir: dir})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	fc := agentdv1.NewFileServiceClient(ts.Conn)
	script := `echo "${OPENAI_API_KEY-unset} ${OTHER-unset} ${DROPPED-unset} ${LD_PRELOAD-unset}"`

	ev := startAndRead(t, c, &agentdv1.StartRequest{Command: script})
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); got != "unset unset unset unset\n" {
		t.Errorf("before any secret: %q", got)
	}
	// What the workload writes on disk there is no variable.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"DROPPED", "LD_PRELOAD"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("/tmp/evil.so"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, value string) error {
		w, err := fc.Write(t.Context())
		if err != nil {
			return err
		}
		if err := w.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: dir + "/" + name, Mode: 0o600, CreateParents: true}}}); err == nil {
			_ = w.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: []byte(value)}})
		}
		_, err = w.CloseAndRecv()
		return err
	}
	for name, v := range map[string]string{"OPENAI_API_KEY": "sk-1\n", "OTHER": "two words"} {
		if err := write(name, v); err != nil {
			t.Fatalf("deliver %s: %v", name, err)
		}
	}
	for _, name := range []string{"LD_PRELOAD", "PATH", "AGENTD_SANDBOX_KEY", "PYTHONPATH", "BAD-NAME"} {
		wantCode(t, write(name, "x"), codes.InvalidArgument, "secret")
	}
	ev = startAndRead(t, c, &agentdv1.StartRequest{Command: script})
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); got != "sk-1 two words unset unset\n" {
		t.Errorf("with secrets: %q", got)
	}
	ev = startAndRead(t, c, &agentdv1.StartRequest{Command: script, Env: map[string]string{"OTHER": "mine"}})
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); got != "sk-1 mine unset unset\n" {
		t.Errorf("the caller's variable over a secret: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "OPENAI_API_KEY")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a delivered secret is on disk: %v", err)
	}
}

// The hub's variables give a sandbox its egress proxy's address; serveEgress
// refuses an address off loopback.
func TestSandboxEgressFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		EnvSandboxKey:    base64.StdEncoding.EncodeToString(make([]byte, ed25519.SeedSize)),
		EnvSandboxHub:    "unix:///run/agentd/hub.sock",
		EnvSandboxID:     "sb-x",
		EnvSandboxEgress: "127.0.0.1:3128",
	}
	c, ok, err := SandboxFromEnv(func(k string) string { return env[k] })
	if err != nil || !ok || c.Egress != "127.0.0.1:3128" {
		t.Fatalf("SandboxFromEnv = %+v %v %v", c, ok, err)
	}
	bad := *c
	bad.Egress = "0.0.0.0:3128"
	dial := func(context.Context) (net.Conn, error) { return nil, errors.New("not dialled") }
	if _, _, err := serveEgress(t.Context(), &bad, dial, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "want a loopback ip:port") {
		t.Errorf("serveEgress(%s) = %v; want refused (not loopback)", bad.Egress, err)
	}
}
