package sandboxes

import (
	"context"
	"strings"
	"testing"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// imagelessDriver has no image at all.
type imagelessDriver struct{ sandbox.Driver }

func (imagelessDriver) Image(_ context.Context, ref string) (sandbox.Image, error) {
	return sandbox.Image{}, sandbox.ErrNotFound
}

// clusterDriver says its own words, as the Kubernetes driver does.
type clusterDriver struct{ imagelessDriver }

func (clusterDriver) Terms() sandbox.Terms {
	return sandbox.Terms{Engine: "the cluster's nodes", Container: "record", Volume: "claim", Removal: "kubectl delete",
		ImageFix: "import it into each node", Owned: "its Pod is in the cluster"}
}

// The hub's messages name what the operator's engine has: a Docker
// engine's container and volume, or a driver's own words, never Docker's
// on a cluster.
func TestMessagesUseTheDriversTerms(t *testing.T) {
	t.Parallel()
	sb := store.Sandbox{ID: "sb1", Conversation: "c", Environment: "builtin", Hub: "r2"}
	for _, tc := range []struct {
		name       string
		drv        sandbox.Driver
		base, gone []string // what the missing base image's and the down owner's messages say
		docker     bool     // whether they may name Docker
	}{
		{"docker", imagelessDriver{}, []string{"not on this hub's Docker engine", "build or pull it there", "make sandbox-base"},
			[]string{"on that replica's Docker engine"}, true},
		{"cluster", clusterDriver{}, []string{"not on the cluster's nodes", "import it into each node"},
			[]string{"which is not running: its Pod is in the cluster."}, false},
	} {
		m := &Manager{o: Options{Driver: tc.drv, BaseImage: "base:1"}}
		_, err := m.builtinImage(t.Context())
		gone := m.ownerGone(sb)
		for _, c := range []struct {
			err  error
			want []string
		}{{err, tc.base}, {gone, tc.gone}} {
			if c.err == nil {
				t.Fatalf("%s: no error", tc.name)
			}
			for _, w := range c.want {
				if !strings.Contains(c.err.Error(), w) {
					t.Errorf("%s: %q; want it to say %q", tc.name, c.err, w)
				}
			}
			if !tc.docker && strings.Contains(strings.ToLower(c.err.Error()), "docker") {
				t.Errorf("%s: %q names Docker", tc.name, c.err)
			}
		}
	}
}
