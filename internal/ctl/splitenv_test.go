package ctl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exec, sh and python have an --env of their own (KEY=VALUE); a bare NAME
// there is the hub environment, as the global --env NAME.
func TestSplitEnv(t *testing.T) {
	t.Parallel()
	vars, name, err := splitEnv([]string{"A=1", "py", "B=x=y"})
	if err != nil || name != "py" || !cmp.Equal(vars, map[string]string{"A": "1", "B": "x=y"}) {
		t.Errorf("splitEnv = %v %q %v", vars, name, err)
	}
	for _, bad := range [][]string{{"=1"}, {"py", "rb"}} {
		if _, _, err := splitEnv(bad); err == nil {
			t.Errorf("splitEnv(%q): no error", bad)
		}
	}
	if err := envNameNeedsHub("py", false); err == nil {
		t.Error("a bare --env NAME without a hub: no error")
	}
	if err := envNameNeedsHub("py", true); err != nil {
		t.Errorf("with a hub: %v", err)
	}
}
