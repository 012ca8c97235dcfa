package sandboxes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// runtimesDriver is a driver whose engine lists runtimes and, with hint
// set, says itself what it lacks (as the Kubernetes driver does).
type runtimesDriver struct {
	sandbox.Driver
	list map[string][]string
}

func (d runtimesDriver) Runtimes(context.Context) (map[string][]string, error) { return d.list, nil }

type hintingDriver struct{ runtimesDriver }

func (hintingDriver) MissingRuntime(isolation, rt string) string {
	return "isolation " + isolation + " needs a RuntimeClass for " + rt
}

// A gVisor environment on an engine without gVisor's runtime is refused
// with FAILED_PRECONDITION: the Docker engine's message names make
// sandbox-runtime, a driver that says what it lacks (Kubernetes: a
// RuntimeClass) is quoted instead; with the runtime listed it passes.
func TestCheckIsolationRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		drv  sandbox.Driver
		want string // "" passes
	}{
		{"docker without runsc", runtimesDriver{list: map[string][]string{"runc": nil}}, "make sandbox-runtime"},
		{"kubernetes without a gVisor class", hintingDriver{runtimesDriver{list: map[string][]string{}}}, "isolation gvisor needs a RuntimeClass for runsc"},
		{"kubernetes with one", hintingDriver{runtimesDriver{list: map[string][]string{sandbox.RuntimeGVisor: {"runsc"}}}}, ""},
	} {
		m := &Manager{o: Options{Driver: tc.drv}}
		err := m.CheckIsolation(t.Context(), sandbox.IsolationGVisor, "none")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want nil", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrNoRuntime) || errs.KindOf(err) != errs.Precondition || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want FAILED_PRECONDITION (ErrNoRuntime) saying %q", tc.name, err, tc.want)
		}
	}
}
