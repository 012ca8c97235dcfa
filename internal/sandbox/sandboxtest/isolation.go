package sandboxtest

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Isolations are the isolations the sandbox tests run under, each as a
// subtest of its own: every sandbox behaviour holds on each.
var Isolations = []string{sandbox.IsolationRunc, sandbox.IsolationGVisor}

// RequireIsolation skips t when the engine cannot run isolation: gVisor
// needs both runtimes of make sandbox-runtime registered (CI runs it). runc
// needs nothing beyond the engine, whose absence the image helpers skip on.
func RequireIsolation(t testing.TB, isolation string) {
	t.Helper()
	if isolation != sandbox.IsolationGVisor {
		return
	}
	if why := dockerUnavailable(); why != "" {
		t.Skip("sandboxtest: " + why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{json .Runtimes}}").Output()
	if err != nil {
		t.Fatalf("sandboxtest: docker info: %v", err)
	}
	var runtimes map[string]json.RawMessage
	if err := json.Unmarshal(out, &runtimes); err != nil {
		t.Fatalf("sandboxtest: docker info's runtimes %q: %v", out, err)
	}
	for _, rt := range []string{sandbox.RuntimeGVisor, sandbox.RuntimeGVisorNet} {
		if _, ok := runtimes[rt]; !ok {
			t.Skipf("sandboxtest: gVisor is not registered with the Docker engine (no runtime %s): run 'make sandbox-runtime' as root (CI does)", rt)
		}
	}
}
