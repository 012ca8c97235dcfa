package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/spf13/pflag"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
)

func (f *sandboxFlags) registerTunnel(fs *pflag.FlagSet) {
	fs.StringVar(&f.tunnelListen, "sandbox-listen", "", "also serve the sandboxes' tunnel (and egress proxy) on this HOST:PORT, over TLS with a certificate from the hub's own CA (kept in --sandbox-dir/sandbox-tunnel-ca), for sandboxes that cannot mount the hub's unix socket: Pods on Kubernetes with --kube-agentd-image. Sandbox ids only; machines dial the public port")
	fs.StringVar(&f.tunnelAdvertise, "sandbox-advertise", "", "HOST:PORT sandboxes dial to reach --sandbox-listen (the name in its certificate; in a cluster, a per-replica headless Service or the replica's address Pods reach; default: --sandbox-listen, which then needs a host and a port)")
}

// tunnelAddr checks --sandbox-listen and --sandbox-advertise and returns
// the address sandboxes dial ("" without --sandbox-listen).
func (f *sandboxFlags) tunnelAddr() (string, error) {
	if f.agentdImage != "" && f.driver != driverKubernetes {
		return "", usageError{errors.New("--kube-agentd-image is for --sandbox-driver kubernetes")}
	}
	if f.tunnelListen == "" {
		if f.tunnelAdvertise != "" {
			return "", usageError{errors.New("--sandbox-advertise needs --sandbox-listen (what it advertises)")}
		}
		return "", nil
	}
	if _, _, err := net.SplitHostPort(f.tunnelListen); err != nil {
		return "", usageError{fmt.Errorf("--sandbox-listen %q: want HOST:PORT: %w", f.tunnelListen, err)}
	}
	adv := f.tunnelAdvertise
	if adv == "" {
		adv = f.tunnelListen
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return "", usageError{fmt.Errorf("--sandbox-advertise %q: want HOST:PORT: %w", adv, err)}
	}
	if a, err := netip.ParseAddr(host); host == "" || port == "0" || (err == nil && a.IsUnspecified()) {
		return "", usageError{fmt.Errorf("sandboxes cannot dial %q: give --sandbox-advertise HOST:PORT (the address they reach the hub at) or --sandbox-listen with a host and a port", adv)}
	}
	return adv, nil
}

// listenTunnel opens --sandbox-listen into o (the manager closes it).
// dial: the sandboxes dial it instead of the socket.
func (f *sandboxFlags) listenTunnel(o *sandboxes.Options, adv string, dial bool) error {
	if f.tunnelListen == "" {
		return nil
	}
	lis, err := net.Listen("tcp", f.tunnelListen)
	if err != nil {
		return fmt.Errorf("--sandbox-listen: %w", err)
	}
	o.TunnelListener, o.TunnelAdvertise, o.TunnelDial = lis, adv, dial
	return nil
}
