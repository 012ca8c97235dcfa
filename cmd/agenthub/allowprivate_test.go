package main

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestEgressAllowPrivateRefused: entries that are public, loopback or not
// a destination are usage errors before anything starts.
func TestEgressAllowPrivateRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ entry, want string }{
		{"127.0.0.1", "loopback"},
		{"8.8.8.0/24", "public"},
		{"http://mirror/", "want a CIDR"},
		{"10.0.0.0/4", "fewer than 8 bits"},
	} {
		f := sandboxFlags{mode: "on", driver: driverDocker, allowPrivate: []string{tc.entry}}
		_, closeFn, err := f.options(t.Context(), "", zap.NewNop())
		closeFn()
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--egress-allow-private %s: got %v, want a usage error containing %q", tc.entry, err, tc.want)
		}
	}
	f := sandboxFlags{allowPrivate: []string{"10.20.0.0/16,192.168.1.5", "fd00::/8"}}
	a, kernel, err := f.allowPrivateOptions(t.Context())
	if err != nil || len(a.Prefixes) != 3 || len(kernel) != 2 {
		t.Errorf("good entries: %v %v %v", a, kernel, err)
	}
}
