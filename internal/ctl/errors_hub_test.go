package ctl_test

import (
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
)

// The errors a hub answers reach the terminal in agentctl's one format.
func TestHubErrorsPrinted(t *testing.T) {
	t.Parallel()
	h := hubtest.Start(t, hubtest.Options{})
	owner := newHubCLI(t, h.URL, h.Token)
	member := newHubCLI(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "token", "create", "--role", "member", "--name", "m")))
	stranger := newHubCLI(t, h.URL, "agt_"+strings.Repeat("0", 43))
	offline := pairMachine(t, h.URL, strings.TrimSpace(owner.must(t, "admin", "pair-code", "create")), "box")

	for _, tc := range []struct {
		name string
		cli  hubCLI
		args []string
		want string
	}{
		{"unauthenticated", stranger, []string{"machines"}, "agentctl: unauthenticated: unknown API token\n"},
		{"permission denied", member, []string{"admin", "pair-code", "create"}, "agentctl: permission denied: token m is a member token; this needs an admin token\n"},
		{"not found", owner, []string{"--machine", "m-nope", "ls", "/"}, "agentctl: machine m-nope not found in org acme; "},
		{"unavailable", owner, []string{"--machine", offline, "ls", "/"}, "agentctl: unavailable: machine " + offline + " is offline (last seen "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.cli.run(t, tc.args...)
			if r.code != 1 || !strings.HasPrefix(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("agentctl %s: exit %d, stderr %q; want exit 1 and one line starting %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
			}
		})
	}
}
