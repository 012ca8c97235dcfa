//go:build linux

package hub_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox/egress"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// An environment's --allow-private addresses reach the sandbox network's
// kernel rules for its public-network sandboxes: environment A's sandbox
// connects to A's private destination in the test's namespace (a host
// route to a veth), not to the namespace's other private address;
// environment B's (no list) does not reach A's destination. Read back from
// nft: A's accept is keyed by its container's address and sits before the
// private-range drops, B has none, and removing A's sandbox removes it.
// Once B's list gains the address, B's running sandbox reaches it after the
// next resync.
func TestSandboxEgressEnvAllowPrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: installs nftables rules")
	}
	base := sandboxtest.BaseImage(t)
	brokerNetns(t) // 10.251.90.2 and .3 listen on 443 in a namespace the host routes to
	opts := egress.Options{NetworkName: "agentd-test-envpriv", BridgeName: "agentd-epk0",
		Subnet: netip.MustParsePrefix("172.30.245.0/24")}
	n, err := egress.Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Cleanup(func() { // registered first, so it runs after the hub's cleanup removed its containers
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Remove(ctx); err != nil {
			t.Errorf("remove rules: %v", err)
		}
		if err := n.RemoveNetwork(ctx); err != nil {
			t.Errorf("remove network: %v", err)
		}
	})
	h := startSandboxHub(t, func(o *sandboxes.Options) {
		o.PublicNetwork = opts.NetworkName
		o.Egress = egress.NewGuard(n, nil)
		o.EgressPrivate = n
	})
	pinned, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", base).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		e, err := h.Store.CreateEnvironment(t.Context(), store.Environment{OrgID: h.Org.ID, Name: name, Image: base,
			Isolation: "runc", Network: "public", CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Store.FinishValidation(t.Context(), h.Org.ID, e.Name, e.Generation,
			store.Environment{State: store.EnvReady, Pinned: strings.TrimSpace(string(pinned))}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	dest := brokerUp.Addr().String()
	if err := h.Store.SetEnvironmentAllowPrivate(t.Context(), h.Org.ID, "a", []string{dest + "/32"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	sys := agentdv1.NewSystemServiceClient(h.cc)
	addr := func(env string) (string, string) {
		t.Helper()
		info, err := sys.Info(h.ctx(env, "c-"+env), &agentdv1.InfoRequest{})
		if err != nil {
			t.Fatalf("a sandbox of %s: %v", env, err)
		}
		id := info.GetTunnel().GetMachineId()
		sb, err := h.Store.Sandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("docker", "inspect", "-f", "{{(index .NetworkSettings.Networks \""+opts.NetworkName+"\").IPAddress}}", sb.ContainerID).Output()
		if err != nil {
			t.Fatalf("inspect %s: %v", sb.ContainerID, err)
		}
		return id, strings.TrimSpace(string(out))
	}
	rules := func() string {
		out, err := exec.Command("nft", "list", "table", "inet", "agentd_"+opts.BridgeName).CombinedOutput()
		if err != nil {
			t.Fatalf("nft list: %v: %s", err, out)
		}
		return string(out)
	}
	idA, ipA := addr("a")
	_, ipB := addr("b")
	ruleA := "ip saddr " + ipA + " ip daddr " + dest + " accept"
	got := rules()
	if !strings.Contains(got, ruleA) {
		t.Errorf("A's sandbox (%s) has no accept %q:\n%s", ipA, ruleA, got)
	}
	if strings.Contains(got, "ip saddr "+ipB+" ") {
		t.Errorf("B's sandbox (%s), of an environment without a list, has an accept:\n%s", ipB, got)
	}
	if i, j := strings.Index(got, ruleA), strings.Index(got, "ip daddr 10.0.0.0/8 drop"); i < 0 || j < i {
		t.Errorf("the accept is not before the private-range drop:\n%s", got)
	}
	if err := n.Check(t.Context()); err != nil {
		t.Errorf("Check: %v", err)
	}
	// From inside the sandboxes: A connects to its environment's private
	// destination; A to the namespace's other private address, and B to
	// A's destination, are dropped.
	connects := func(env, to string) bool {
		t.Helper()
		sb := envSandboxContainer(t, h, env)
		out, err := exec.Command("docker", "exec", sb, "timeout", "5", "bash", "-c", "exec 3<>/dev/tcp/"+to+"/443 && echo connected").CombinedOutput()
		t.Logf("from %s's sandbox to %s: %v %q", env, to, err, out)
		return err == nil && strings.Contains(string(out), "connected")
	}
	if !connects("a", dest) {
		t.Errorf("A's sandbox did not reach its environment's private destination %s", dest)
	}
	if connects("a", brokerOther.Addr().String()) {
		t.Errorf("A's sandbox reached %s, which no list allows", brokerOther.Addr())
	}
	if connects("b", dest) {
		t.Errorf("B's sandbox reached A's private destination %s", dest)
	}
	// A list set while B's sandbox runs reaches it at the next resync (a
	// reaper tick, or here another sandbox's start): every sync is full.
	if err := h.Store.SetEnvironmentAllowPrivate(t.Context(), h.Org.ID, "b", []string{dest + "/32"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Info(h.ctx("b", "c-b2"), &agentdv1.InfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if !connects("b", dest) {
		t.Errorf("B's running sandbox did not reach %s after B's list gained it", dest)
	}
	envs := hubv1.NewEnvironmentServiceClient(h.cc)
	if _, err := envs.RemoveSandbox(h.ctx("", ""), &hubv1.RemoveSandboxRequest{Id: idA}); err != nil {
		t.Fatal(err)
	}
	if got := rules(); strings.Contains(got, "ip saddr "+ipA+" ") || !strings.Contains(got, "ip saddr "+ipB+" ") {
		t.Errorf("after A's sandbox was removed want only B's accepts:\n%s", got)
	}
}

// envSandboxContainer is the container ID of env's conversation sandbox ("c-"+env).
func envSandboxContainer(t *testing.T, h *sandboxHub, env string) string {
	t.Helper()
	sbs, err := h.Store.ListSandboxes(t.Context(), h.Org.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.Environment == env && sb.Conversation == "c-"+env {
			return sb.ContainerID
		}
	}
	t.Fatalf("no sandbox of %s", env)
	return ""
}
