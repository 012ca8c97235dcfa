package hub_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxfake"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// env set NAME --allow-private stores the environment's private
// destinations (normalised), env show and env show --json show them, ""
// clears them; bad entries, the built-in environment and an unknown one
// are refused and change nothing.
func TestEnvSetAllowPrivate(t *testing.T) {
	t.Parallel()
	drv, err := sandboxfake.New(sandboxfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	h := hubtest.Start(t, hubtest.Options{Sandboxes: sandboxes.Options{
		Driver: drv, AgentdDir: sandboxtest.AgentdBinary(t), SocketDir: t.TempDir(), BuiltinNetwork: "none", WarmBuiltin: 0,
	}})
	if _, err := h.Store.CreateEnvironment(t.Context(), store.Environment{OrgID: h.Org.ID, Name: "py", Image: "ghcr.io/acme/py:1",
		Network: "public", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := ctl.Main(t.Context(), append([]string{"--hub", h.URL, "--token-file", tf}, args...),
			ctl.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	const want = "allow private: 10.20.0.0/16, 192.168.1.5/32, mirror.internal (through the egress proxy, besides the hub's)"
	code, out, errs := run("env", "set", "py", "--allow-private", "10.20.1.0/16,mirror.internal", "--allow-private", "192.168.1.5")
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("env set --allow-private = %d %q %q; want a line %q", code, out, errs, want)
	}
	if code, out, _ := run("env", "show", "py"); code != 0 || !strings.Contains(out, want) {
		t.Errorf("env show = %d %q", code, out)
	}
	if code, out, _ := run("--json", "env", "show", "py"); code != 0 || !strings.Contains(out, `"allow_private":["10.20.0.0/16","192.168.1.5/32","mirror.internal"]`) {
		t.Errorf("env show --json = %d %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"env", "set", "py", "--allow-private", "127.0.0.1"}, "loopback"},
		{[]string{"env", "set", "py", "--allow-private", "8.8.8.8"}, "public destination"},
		{[]string{"env", "set", "builtin", "--allow-private", "10.0.0.0/8"}, "agenthub serve --egress-allow-private"},
		{[]string{"env", "set", "nope", "--allow-private", "10.0.0.0/8"}, "not found"},
	} {
		if code, _, errs := run(tc.args...); code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v = %d %q; want a refusal saying %q", tc.args, code, errs, tc.want)
		}
	}
	if l, err := h.Store.EnvironmentAllowPrivate(t.Context(), h.Org.ID, "py"); err != nil || len(l) != 3 {
		t.Errorf("after refusals the list is %v, %v", l, err)
	}
	if code, out, _ := run("env", "set", "py", "--allow-private", ""); code != 0 || strings.Contains(out, "allow private") {
		t.Errorf("clearing: %d %q", code, out)
	}
}
