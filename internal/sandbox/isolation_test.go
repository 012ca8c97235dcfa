package sandbox

import "testing"

func TestRuntimeForAndPlatform(t *testing.T) {
	for _, tc := range []struct{ isolation, network, want string }{
		{IsolationRunc, "none", ""},
		{IsolationRunc, "agentd-sandbox", ""},
		{"", "none", ""},
		{IsolationGVisor, "none", RuntimeGVisor},
		{IsolationGVisor, "agentd-sandbox", RuntimeGVisorNet},
	} {
		if got := RuntimeFor(tc.isolation, tc.network); got != tc.want {
			t.Errorf("RuntimeFor(%q, %q) = %q, want %q", tc.isolation, tc.network, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--platform=ptrace", "--host-uds=open"}, "ptrace"},
		{[]string{"--host-uds=open", "--platform", "kvm"}, "kvm"},
		{[]string{"--network=none"}, ""},
		{[]string{"--platform"}, ""},
		{nil, ""},
	} {
		if got := Platform(tc.args); got != tc.want {
			t.Errorf("Platform(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
