package docker

import (
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// A spec's runtime is the one its container runs on: under gVisor the
// sandbox's processes see gVisor's kernel (dmesg), on either of its two
// runtimes; under runc the host's. The engine lists both of gVisor's.
func TestRuntime(t *testing.T) {
	d := engine(t)
	image := sandboxtest.MinimalImage(t)
	for _, tc := range []struct {
		isolation, network string
		gvisor             bool
	}{
		{sandbox.IsolationRunc, "none", false},
		{sandbox.IsolationGVisor, "none", true},
		{sandbox.IsolationGVisor, "bridge", true},
	} {
		t.Run(tc.isolation+"/"+tc.network, func(t *testing.T) {
			t.Parallel()
			sandboxtest.RequireIsolation(t, tc.isolation)
			rt := sandbox.RuntimeFor(tc.isolation, tc.network)
			if rt != "" {
				runtimes, err := d.Runtimes(t.Context())
				if err != nil {
					t.Fatalf("Runtimes: %v", err)
				}
				if _, ok := runtimes[rt]; !ok {
					t.Fatalf("Runtimes = %v, without %s", runtimes, rt)
				}
				if p := sandbox.Platform(runtimes[rt]); p == "" {
					t.Errorf("runtime %s's arguments %q name no platform", rt, runtimes[rt])
				}
			}
			s := testSpec(t, uniqueName(t), image, "exec sleep 300")
			s.Runtime = rt // bridge: runsc-net's host sockets in the container's own namespace
			id := create(t, d, s)
			if err := d.Start(t.Context(), id); err != nil {
				t.Fatalf("Start: %v", err)
			}
			out, _ := execIn(t, d, id, "dmesg 2>&1 | head -1")
			if got := strings.Contains(out, "gVisor"); got != tc.gvisor {
				t.Errorf("dmesg in a %s sandbox (runtime %q): %q; gVisor's kernel: %v, want %v", tc.isolation, rt, out, got, tc.gvisor)
			}
			// The sandbox's pids limit still lets it fork (the engine
			// counts gVisor's own host threads too).
			if out, code := execIn(t, d, id, "for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait; echo forked"); code != 0 || out != "forked" {
				t.Errorf("forking 8 processes: %q, exit %d", out, code)
			}
		})
	}
}
