//go:build linux

package egress

import (
	"bytes"
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"go.uber.org/zap/zaptest"
)

// TestSandboxEgressAllowFrom: an environment's private destination,
// installed for one sandbox's address (AllowFrom), lets that sandbox reach
// the namespace's private address, while a sandbox of an environment
// without it (another address on the same network) is still dropped, and
// the gateway stays refused; after Forget the rule is gone from the table
// read back, and the first sandbox's address is dropped again.
func TestSandboxEgressAllowFrom(t *testing.T) {
	cli := requireEnv(t)
	buildImage(t, cli)
	opts := Options{
		NetworkName: "agentd-egress-test-envap",
		BridgeName:  "agentd-eenv0",
		Subnet:      netip.MustParsePrefix("172.30.247.0/24"),
		Logger:      zaptest.NewLogger(t),
	}
	clean(t, cli, opts)
	t.Cleanup(func() { clean(t, cli, opts) })
	newNetns(t)
	ns := serve(t, listenInNetns(t))
	private := netip.AddrPortFrom(nsPrivate.Addr(), ns.port)
	hostReaches(t, private, ns)

	n, err := Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	a := netip.MustParseAddr("172.30.247.10") // environment A's sandbox
	b := netip.MustParseAddr("172.30.247.11") // environment B's sandbox
	if err := n.AllowFrom(t.Context(), a, []netip.Prefix{netip.PrefixFrom(nsPrivate.Addr(), 32)}); err != nil {
		t.Fatalf("AllowFrom: %v", err)
	}
	rule := "ip saddr " + a.String() + " ip daddr " + nsPrivate.Addr().String() + " accept"
	if got := listEgress(t, n); !strings.Contains(got, rule) {
		t.Fatalf("rule %q not in the table read back:\n%s", rule, got)
	}
	if err := n.Check(t.Context()); err != nil {
		t.Fatalf("Check after AllowFrom: %v", err)
	}
	if out, code := probeFrom(t, cli, opts.NetworkName, a, private); code != 0 || !strings.Contains(out, ns.token) {
		t.Errorf("A's sandbox did not reach its environment's private destination %s (exit %d): %q", private, code, out)
	}
	gw := netip.AddrPortFrom(n.Gateway, ns.port)
	for what, c := range map[string]struct {
		from netip.Addr
		to   netip.AddrPort
	}{"B's sandbox to A's destination": {b, private}, "A's sandbox to the gateway": {a, gw}} {
		before := ns.accepted.Load()
		if out, code := probeFrom(t, cli, opts.NetworkName, c.from, c.to); code == 0 || strings.Contains(out, ns.token) || ns.accepted.Load() != before {
			t.Errorf("%s %s was reached (exit %d): %q", what, c.to, code, out)
		}
	}

	if err := n.Forget(t.Context(), a); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if got := listEgress(t, n); strings.Contains(got, "saddr") {
		t.Errorf("a per-sandbox rule is left after Forget:\n%s", got)
	}
	if err := n.Check(t.Context()); err != nil {
		t.Fatalf("Check after Forget: %v", err)
	}
	before := ns.accepted.Load()
	if out, code := probeFrom(t, cli, opts.NetworkName, a, private); code == 0 || strings.Contains(out, ns.token) || ns.accepted.Load() != before {
		t.Errorf("after Forget A's address still reached %s (exit %d): %q", private, code, out)
	}

	// Retain (the hub's reconcile) drops the sources it is not told to keep.
	for _, s := range []netip.Addr{a, b} {
		if err := n.AllowFrom(t.Context(), s, []netip.Prefix{netip.PrefixFrom(nsPrivate.Addr(), 32)}); err != nil {
			t.Fatalf("AllowFrom %s: %v", s, err)
		}
	}
	if err := n.Retain(t.Context(), func(x netip.Addr) bool { return x == b }); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	got := listEgress(t, n)
	if strings.Contains(got, "saddr "+a.String()+" ") || !strings.Contains(got, "saddr "+b.String()+" ") {
		t.Errorf("after Retain(b) want only b's rule:\n%s", got)
	}
}

// listEgress is the table as nft lists it.
func listEgress(t *testing.T, n *Network) string {
	t.Helper()
	return run(t, "nft", "list", "table", "inet", tableName(n.Bridge))
}

// probeFrom is probe from a container with the address src on network.
func probeFrom(t *testing.T, cli *client.Client, net string, src netip.Addr, to netip.AddrPort) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image: testImage,
			Cmd:   []string{"nc", "-w", "2", to.Addr().String(), strconv.Itoa(int(to.Port()))},
		},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(net)},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			net: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: src}},
		}},
	})
	if err != nil {
		t.Fatalf("create probe: %v", err)
	}
	defer func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove probe: %v", err)
		}
	}()
	wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start probe: %v", err)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
	case err := <-wait.Error:
		t.Fatalf("wait for probe: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("probe logs: %v", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatalf("probe logs: %v", err)
	}
	t.Logf("probe from %s nc %s: exit %d, output %q", src, to, code, out.String())
	return out.String(), code
}

// TestSyncContainers: the accepts follow the running containers named:
// a running container's address gets its list, a removed container's
// rules go, and an empty want leaves none (the hub's reconcile).
func TestSyncContainers(t *testing.T) {
	cli := requireEnv(t)
	buildImage(t, cli)
	opts := Options{
		NetworkName: "agentd-egress-test-sync",
		BridgeName:  "agentd-esync0",
		Subnet:      netip.MustParsePrefix("172.30.246.0/24"),
		Logger:      zaptest.NewLogger(t),
	}
	clean(t, cli, opts)
	t.Cleanup(func() { clean(t, cli, opts) })
	n, err := Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	ip := netip.MustParseAddr("172.30.246.20")
	c, err := cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Config:     &container.Config{Image: testImage, Cmd: []string{"sleep", "120"}},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(opts.NetworkName)},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			opts.NetworkName: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}},
		}},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	gone := false
	t.Cleanup(func() {
		if gone {
			return
		}
		ctx, cancel := cleanupCtx()
		defer cancel()
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	dest := []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")}
	rule := "ip saddr 172.30.246.20 ip daddr 10.99.0.0/16 accept"
	// Not running yet: no address, no rule.
	if err := n.SyncContainers(t.Context(), map[string][]netip.Prefix{c.ID: dest}); err != nil {
		t.Fatalf("SyncContainers (created): %v", err)
	}
	if got := listEgress(t, n); strings.Contains(got, "saddr") {
		t.Errorf("a rule for a container that does not run:\n%s", got)
	}
	if _, err := cli.ContainerStart(t.Context(), c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := n.SyncContainers(t.Context(), map[string][]netip.Prefix{c.ID: dest}); err != nil {
		t.Fatalf("SyncContainers: %v", err)
	}
	if got := listEgress(t, n); !strings.Contains(got, rule) {
		t.Errorf("rule %q missing:\n%s", rule, got)
	}
	if err := n.Check(t.Context()); err != nil {
		t.Errorf("Check: %v", err)
	}
	if _, err := cli.ContainerRemove(t.Context(), c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	gone = true
	// Still named, but gone: its rule goes.
	if err := n.SyncContainers(t.Context(), map[string][]netip.Prefix{c.ID: dest}); err != nil {
		t.Fatalf("SyncContainers (removed): %v", err)
	}
	if got := listEgress(t, n); strings.Contains(got, "saddr") {
		t.Errorf("a rule is left for a removed container:\n%s", got)
	}
}
