package hub_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube"
	"github.com/devdepot-ai/agentd/internal/sandbox/kube/kubetest"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// A hub on a cluster whose CNI does not enforce NetworkPolicy (the shared
// cluster's enforcer stopped for the test) refuses a call into an
// environment of network public, naming the cause, and makes no sandbox;
// the builtin environment (network none) still runs. It stops the shared
// cluster's enforcer (scripts/k8s-netpol.sh stop, started again at the
// end), so it runs only with AGENTD_KUBE_NETPOL_OFF_TEST=1.
func TestKubePublicRefusedWithoutPolicy(t *testing.T) {
	kubetest.Admin(t) // skips without a cluster, saying how to start one
	if os.Getenv("AGENTD_KUBE_NETPOL_OFF_TEST") != "1" {
		t.Skip("stops the shared cluster's NetworkPolicy enforcer: run with AGENTD_KUBE_NETPOL_OFF_TEST=1")
	}
	k := startKube(t)
	drv := k.drv
	netpol := func(op string) {
		state := filepath.Dir(k.admin)
		cmd := exec.Command("bash", "../../scripts/k8s-netpol.sh", op)
		cmd.Env = append(os.Environ(), "K8S_STATE="+state, "K8S_CACHE="+filepath.Dir(state))
		out, err := cmd.CombinedOutput()
		t.Logf("%s k8s-netpol.sh %s: %s", time.Now().UTC().Format(time.RFC3339), op, out)
		if err != nil {
			t.Fatalf("k8s-netpol.sh %s: %v", op, err)
		}
	}

	netpol("stop")
	t.Cleanup(func() { netpol("start") })
	guard := kube.NewPolicyGuard(drv, time.Hour)
	p, err := drv.ProbePolicy(t.Context())
	if err != nil || p.Enforced {
		t.Fatalf("probe with the enforcer stopped: %+v, %v; want not enforced", p, err)
	}
	t.Logf("probe: not enforced, took %v", p.Took)

	o := k.options(sandboxtest.AgentdBinary(t))
	o.PublicNetwork, o.Egress = kube.NetworkPublic, guard
	kh := k.startHub(t, o)
	h := kh.h
	now := time.Now()
	e, err := h.Store.CreateEnvironment(t.Context(), store.Environment{OrgID: h.Org.ID, Name: "pub", Image: k.image,
		Network: "public", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	// Validated as the hub's validator would mark it (no registry here).
	if _, err := h.Store.FinishValidation(t.Context(), h.Org.ID, "pub", e.Generation,
		store.Environment{State: store.EnvReady, Pinned: k.image}, now); err != nil {
		t.Fatal(err)
	}
	agentctl := func(env string, args ...string) (int, string, string) {
		return kh.ctl(append([]string{"--env", env, "--conversation", "c-np"}, args...)...)
	}
	code, out, errOut := agentctl("pub", "sh", "echo ran")
	if code == 0 || strings.Contains(out, "ran") || !strings.Contains(errOut, "does not enforce NetworkPolicy") {
		t.Errorf("a public environment on a cluster without policy: exit %d %q %q; want a refusal naming the cause", code, out, errOut)
	}
	t.Logf("the refusal: %s", strings.TrimSpace(errOut))
	if sbs, err := h.Store.ListSandboxes(t.Context(), ""); err != nil || len(sbs) != 0 {
		t.Errorf("sandboxes after the refusal: %+v, %v; want none", sbs, err)
	}
	if code, out, errOut := agentctl("builtin", "sh", "echo ran"); code != 0 || out != "ran\n" {
		t.Errorf("the builtin environment (network none): exit %d %q %q; want it to run", code, out, errOut)
	}
}
