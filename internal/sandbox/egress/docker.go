package egress

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Bridge driver options the sandbox network is created with.
const (
	optBridgeName = "com.docker.network.bridge.name"
	optICC        = "com.docker.network.bridge.enable_icc"
	optMasquerade = "com.docker.network.bridge.enable_ip_masquerade"
)

// existingBridge returns the bridge name of the network called name, ""
// when there is no such network, it names no bridge, or the engine does
// not say.
func existingBridge(ctx context.Context, cli *client.Client, name string) string {
	res, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		return ""
	}
	return res.Network.Options[optBridgeName]
}

// ensureNetwork creates the network, or checks the one of that name, and
// returns its ID and gateway.
func ensureNetwork(ctx context.Context, cli *client.Client, o Options) (string, netip.Addr, error) {
	res, err := cli.NetworkInspect(ctx, o.NetworkName, client.NetworkInspectOptions{})
	if err == nil {
		gw, err := checkNetwork(res.Network.Network, o)
		return res.Network.ID, gw, err
	}
	if !isNotFound(err) {
		return "", netip.Addr{}, fmt.Errorf("inspect network %s: %w", o.NetworkName, err)
	}
	gw := o.Subnet.Addr().Next()
	noIPv6 := false
	created, err := cli.NetworkCreate(ctx, o.NetworkName, client.NetworkCreateOptions{
		Driver:     "bridge",
		EnableIPv6: &noIPv6,
		IPAM: &network.IPAM{
			Driver: "default",
			Config: []network.IPAMConfig{{Subnet: o.Subnet, Gateway: gw}},
		},
		Options: map[string]string{
			optBridgeName: o.BridgeName,
			optICC:        "false",
			optMasquerade: "true",
		},
		Labels: map[string]string{LabelNetwork: "1"},
	})
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("create network %s (bridge %s, subnet %s; choose another subnet if it overlaps): %w",
			o.NetworkName, o.BridgeName, o.Subnet, err)
	}
	return created.ID, gw, nil
}

// checkNetwork compares an existing network with the options and returns
// its gateway, or an error wrapping ErrNetworkConflict that lists every
// difference.
func checkNetwork(n network.Network, o Options) (netip.Addr, error) {
	var diffs []string
	if n.Driver != "bridge" {
		diffs = append(diffs, fmt.Sprintf("driver %q, want bridge", n.Driver))
	}
	if got := n.Options[optBridgeName]; got != o.BridgeName {
		diffs = append(diffs, fmt.Sprintf("bridge name %q, want %q", got, o.BridgeName))
	}
	if got := n.Options[optICC]; got != "false" {
		diffs = append(diffs, fmt.Sprintf("inter-container traffic on (%s=%q)", optICC, got))
	}
	if n.Internal {
		diffs = append(diffs, "internal (no public egress)")
	}
	if n.EnableIPv6 {
		diffs = append(diffs, "IPv6 enabled")
	}
	var subnets []string
	gw := o.Subnet.Addr().Next()
	for _, c := range n.IPAM.Config {
		subnets = append(subnets, c.Subnet.String())
		if c.Gateway.IsValid() {
			gw = c.Gateway
		}
	}
	if !slices.Equal(subnets, []string{o.Subnet.String()}) {
		diffs = append(diffs, fmt.Sprintf("subnets [%s], want [%s]", strings.Join(subnets, " "), o.Subnet))
	}
	if len(diffs) > 0 {
		return netip.Addr{}, fmt.Errorf("%w: network %s: %s: remove it (docker network rm %s) or configure another network name",
			ErrNetworkConflict, n.Name, strings.Join(diffs, "; "), n.Name)
	}
	return gw, nil
}

// isNotFound reports whether the engine said "no such object".
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
