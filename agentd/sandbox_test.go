package agentd

import (
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// Variables in SecretsDir reach every command, read at its start (so ones
// written after the daemon started count); the caller's own win; files
// that are no variable, and AGENTD_* names, set nothing.
func TestSecretsDirReachesCommands(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "secrets")
	ts := newTestServer(t, Options{SecretsDir: dir})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	script := `echo "${OPENAI_API_KEY-unset} ${OTHER-unset} ${AGENTD_SANDBOX_KEY-unset} ${BAD_NAME-unset}"`

	ev := startAndRead(t, c, &agentdv1.StartRequest{Command: script})
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); got != "unset unset unset unset\n" {
		t.Errorf("before any secret: %q", got)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"OPENAI_API_KEY": "sk-1\n", "OTHER": "two words", "AGENTD_SANDBOX_KEY": "x", "BAD-NAME": "y"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ev = startAndRead(t, c, &agentdv1.StartRequest{Command: script})
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); got != "sk-1 two words unset unset\n" {
		t.Errorf("with secrets: %q", got)
	}
	ev = startAndRead(t, c, &agentdv1.StartRequest{Command: script, Env: map[string]string{"OTHER": "mine"}})
	if got := string(ev.out[agentdv1.OutputStream_OUTPUT_STREAM_STDOUT]); got != "sk-1 mine unset unset\n" {
		t.Errorf("the caller's variable over a secret: %q", got)
	}
}

// The hub's variables give a sandbox its egress proxy's address; serveEgress
// refuses a hub that is not a unix socket and an address off loopback.
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
	for _, tc := range []struct{ hub, egress, want string }{
		{"wss://hub.example.com", "127.0.0.1:0", "is not a unix socket"},
		{"unix:///run/agentd/hub.sock", "0.0.0.0:3128", "want a loopback ip:port"},
	} {
		bad := *c
		bad.Hub, bad.Egress = tc.hub, tc.egress
		if _, err := serveEgress(t.Context(), &bad, zap.NewNop()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serveEgress(%s, %s) = %v; want %q", tc.hub, tc.egress, err, tc.want)
		}
	}
}
