package hub_test

import (
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
)

// A sandbox's default CPU limit leaves the host a CPU: 2 where it can,
// the host's CPUs minus one below that, half of a single CPU.
func TestDefaultSandboxCPUs(t *testing.T) {
	for _, tc := range []struct {
		host int
		want float64
	}{
		{1, 0.5},
		{2, 1},
		{3, 2},
		{4, 2},
		{64, 2},
	} {
		if got := sandboxes.DefaultSandboxCPUs(tc.host); got != tc.want {
			t.Errorf("DefaultSandboxCPUs(%d) = %g, want %g", tc.host, got, tc.want)
		}
		if err := sandboxes.CheckSandboxCPUs(sandboxes.DefaultSandboxCPUs(tc.host), tc.host); err != nil {
			t.Errorf("the default on %d CPUs is refused: %v", tc.host, err)
		}
	}
}

// An explicit CPU limit the host cannot give is refused, saying what it has.
func TestCheckSandboxCPUs(t *testing.T) {
	for _, tc := range []struct {
		cpus float64
		host int
		want string // "" : accepted
	}{
		{1, 2, ""},
		{2, 2, ""},
		{0.5, 1, ""},
		{3, 2, "this host has 2"},
		{1.5, 1, "this host has 1"},
		{0, 2, "want more than 0"},
		{-1, 2, "want more than 0"},
	} {
		err := sandboxes.CheckSandboxCPUs(tc.cpus, tc.host)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckSandboxCPUs(%g, %d): %v; want accepted", tc.cpus, tc.host, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckSandboxCPUs(%g, %d): %v; want an error with %q", tc.cpus, tc.host, err, tc.want)
		}
	}
}
