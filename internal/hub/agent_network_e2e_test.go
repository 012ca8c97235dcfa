package hub_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/agentimage"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// --network open is the only way an agent's sandbox gets a network
// interface, and the run's activity record says it was asked for. The
// hub's "public" network is here an internal Docker network the test
// makes (no route out), so nothing leaves the machine.
func TestAgentRunOpenNetwork(t *testing.T) {
	minimal := sandboxtest.MinimalImage(t)
	runner := "agentd/runner-managed:netfixture-latest"
	if out, err := exec.Command("docker", "tag", minimal, runner).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", runner).Run() })
	network := fmt.Sprintf("agentd-test-open-%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "network", "create", "--internal", network).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v: %s", err, out)
	}
	// Registered before the hub starts, so it runs after the hub's own
	// clean-up removed the sandboxes (and their endpoints).
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "network", "rm", network).CombinedOutput(); err != nil {
			t.Errorf("docker network rm %s: %v: %s", network, err, out)
		}
	})
	h := startSandboxHubWith(t, func(o *sandboxes.Options) {
		o.PublicNetwork = network
		o.Agents = []agentimage.Profile{agentProfile(t, "netfixture", customProfile)}
	}, hubtest.Options{})
	run := h.agentctl()

	for _, tc := range []struct {
		flags []string
		want  string // the interfaces
		note  string // in the activity record
	}{
		{nil, "lo\n", "network none, ttl 1h0m0s)"},
		{[]string{"--network", "open"}, "eth0\nlo\n", "network public, ttl 1h0m0s): the public network, as asked (--network open)"},
	} {
		args := append(append([]string{"agent", "run", "netfixture", "--image", runner}, tc.flags...), "--", "-c", "ls /sys/class/net")
		code, out, errs := run(args...)
		if code != 0 || out != tc.want {
			t.Errorf("%v = %d %q (%s); want the interfaces %q", tc.flags, code, out, errs, tc.want)
			continue
		}
		id := sandboxOf(t, errs)
		_, activity, _ := run("activity")
		if !strings.Contains(activity, "ran agent netfixture in "+id+" (image "+runner+", id sha256:") ||
			!strings.Contains(activity, tc.note) {
			t.Errorf("%v: activity lacks the run of %s with %q:\n%s", tc.flags, id, tc.note, activity)
		}
	}
}
