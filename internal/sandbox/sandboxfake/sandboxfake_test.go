package sandboxfake_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/drivertest"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxfake"
)

// scripts are the suite's behaviours as host shell commands; /workspace is
// rewritten to the container's workspace directory.
var scripts = map[drivertest.Behaviour]string{
	drivertest.Serve:      `trap "exit 0" TERM; sleep 300 & wait`,
	drivertest.IgnoreTerm: `trap "" TERM; sleep 300 & wait`,
	drivertest.Exit3:      `exit 3`,
	drivertest.ExitSoon:   `sleep 2`,
	drivertest.WriteTree:  `mkdir -p /workspace/d && printf one > /workspace/d/f && chmod 640 /workspace/d/f && ln -s d/f /workspace/l && TZ=UTC touch -d "2020-01-02 03:04:05" /workspace/d/f`,
	drivertest.CheckTree:  `[ "$(cat /workspace/d/f)" = one ] && [ "$(stat -c %a /workspace/d/f)" = 640 ] && [ -L /workspace/l ] && [ "$(readlink /workspace/l)" = d/f ] && [ "$(stat -c %Y /workspace/d/f)" = 1577934245 ] && [ ! -e /workspace/fork-only ] && touch /workspace/fork-only`,
	// The process is the test's user: only the owner can be checked.
	drivertest.WorkspaceOwned: `[ "$(stat -c %u:%g /workspace)" = 1000:1000 ] && touch /workspace/.owned`,
}

func TestConformance(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d, err := sandboxfake.New(sandboxfake.Options{
			Registry: map[string]sandbox.Image{"registry.test/agentd-test/pull:1": {Architecture: "amd64", OS: "linux"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		img := d.AddImage("agentd-test/fake:1", sandbox.Image{Architecture: "amd64", OS: "linux", User: "1000:1000"})
		return drivertest.Harness{
			Driver: d,
			Spec: func(t *testing.T, b drivertest.Behaviour) (sandbox.Spec, bool) {
				if b == drivertest.WorkspaceOwned && os.Geteuid() != 0 {
					return sandbox.Spec{}, false // only root can give it to uid 1000
				}
				return sandbox.Spec{
					Image:   img.ID,
					Cmd:     []string{"sh", "-c", scripts[b]},
					Network: "none",
				}, true
			},
			MissingImage: "registry.test/agentd-test/absent:1",
			PullImage:    "registry.test/agentd-test/pull:1",
		}
	})
}
