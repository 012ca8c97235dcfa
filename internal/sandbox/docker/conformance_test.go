package docker

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/drivertest"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// conformanceScripts are the suite's behaviours for sh in the busybox-only
// test image, under the engine's init (which forwards SIGTERM to sh).
var conformanceScripts = map[drivertest.Behaviour]string{
	drivertest.Serve:      `trap "exit 0" TERM; sleep 300 & wait`,
	drivertest.IgnoreTerm: `trap "" TERM; sleep 300 & wait`,
	drivertest.Exit3:      `exit 3`,
	drivertest.ExitSoon:   `sleep 2`,
	drivertest.WriteTree:  `mkdir -p /workspace/d && printf one > /workspace/d/f && chmod 640 /workspace/d/f && ln -s d/f /workspace/l && TZ=UTC touch -d "2020-01-02 03:04:05" /workspace/d/f`,
	drivertest.CheckTree:  `[ "$(cat /workspace/d/f)" = one ] && [ "$(stat -c %a /workspace/d/f)" = 640 ] && [ -L /workspace/l ] && [ "$(readlink /workspace/l)" = d/f ] && [ "$(stat -c %Y /workspace/d/f)" = 1577934245 ] && [ ! -e /workspace/fork-only ] && touch /workspace/fork-only`,
	drivertest.WorkspaceOwned: `[ "$(id -u)" = 1000 ] && [ "$(stat -c %u:%g /workspace)" = 1000:1000 ] && ` +
		`touch /workspace/.owned`,
}

// The conformance suite on the engine, under each isolation: sandboxes of
// the minimal test image; Pull from a registry on loopback
// (newTestRegistry), whose missing tag is the missing image, so that
// nothing leaves the host.
func TestConformance(t *testing.T) {
	for _, iso := range sandboxtest.Isolations {
		t.Run(iso, func(t *testing.T) { conformance(t, iso) })
	}
}

func conformance(t *testing.T, iso string) {
	sandboxtest.RequireIsolation(t, iso)
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := engine(t)
		image := sandboxtest.MinimalImage(t) // skips without an engine
		reg, _, configDigest := newTestRegistry()
		srv := httptest.NewServer(reg)
		t.Cleanup(srv.Close)
		repo := strings.TrimPrefix(srv.URL, "http://") + "/agentd-test/pull"
		t.Cleanup(func() {
			_, _ = d.cli.ImageRemove(cleanupCtx(t), configDigest, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		})
		return drivertest.Harness{
			Driver: d,
			Spec: func(t *testing.T, b drivertest.Behaviour) (sandbox.Spec, bool) {
				return sandbox.Spec{
					Image:   image,
					Cmd:     []string{"sh", "-c", conformanceScripts[b]},
					Network: "none",
					Runtime: sandbox.RuntimeFor(iso, "none"),
					Limits:  sandbox.Limits{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 64, TmpBytes: 8 << 20, HomeBytes: 8 << 20},
				}, true
			},
			MissingImage:   repo + ":absent",
			EnforcesLimits: true,
			PullImage:      repo + ":1",
		}
	})
}
