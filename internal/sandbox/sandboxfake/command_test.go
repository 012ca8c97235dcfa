package sandboxfake

import (
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Container paths are rewritten where they begin and end a path, and
// nowhere else.
func TestCommand(t *testing.T) {
	s := sandbox.Spec{
		Cmd: []string{sandbox.AgentdDir + "/agentd", "run", "--mode", "sandbox"},
		Env: []string{
			"AGENTD_SANDBOX_HUB=unix://" + sandbox.HubSocketDir + "/hub.sock",
			"AGENTD_SANDBOX_KEY_FILE=" + sandbox.KeyDir + "/key",
			"X=/workspaces /workspace:/workspace/a /run/agentdx",
			"HOME=/elsewhere",
		},
		AgentdHostDir: "/h/agentd", HubSocketHostDir: "/h/sock", KeyHostDir: "/h/key",
	}
	argv, env := command(s, paths{workspace: "/h/ws", home: "/h/home", tmp: "/h/tmp"})
	if got, want := strings.Join(argv, " "), "/h/agentd/agentd run --mode sandbox --workspace /h/ws"; got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	got := strings.Join(env[1:], "\n")
	want := strings.Join([]string{
		"TMPDIR=/h/tmp",
		"AGENTD_SANDBOX_HUB=unix:///h/sock/hub.sock",
		"AGENTD_SANDBOX_KEY_FILE=/h/key/key",
		"X=/workspaces /h/ws:/h/ws/a /run/agentdx",
		"HOME=/h/home",
	}, "\n")
	if got != want {
		t.Errorf("env:\n%s\nwant:\n%s", got, want)
	}
}
