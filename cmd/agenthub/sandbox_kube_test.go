package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zaptest"
)

// --sandbox-driver: an unknown driver is refused naming the flag; a
// bounded workspace on Kubernetes is not (hostPath: ext4 images, a
// StorageClass: the claim's request), so the error is the cluster's; a
// cluster that does not answer
// is an error with --sandboxes on and no sandboxes with auto (the Docker
// driver's rules), the API server's address in the error.
// --kube-agentd-image needs the kubernetes driver and --sandbox-listen;
// an address sandboxes cannot dial needs --sandbox-advertise.
func TestSandboxDriverFlags(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there now
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://" + addr + "', insecure-skip-tls-verify: true}}]\n" +
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	kube := []string{"--sandbox-driver", "kubernetes", "--kubeconfig", kubeconfig, "--sandbox-dir", t.TempDir()}
	for _, tc := range []struct {
		args []string
		want string // "": no error, no driver
	}{
		{[]string{"--sandboxes", "on", "--sandbox-driver", "podman"}, "--sandbox-driver \"podman\": want docker or kubernetes"},
		{append([]string{"--sandboxes", "on", "--sandbox-workspace-max", "1GiB", "--kube-storage-class", "fast"}, kube...), addr},
		{append([]string{"--sandboxes", "on"}, kube...), addr},
		{append([]string{"--sandboxes", "auto"}, kube...), ""},
		// The init-container mode and the sandboxes' TCP listener.
		{append([]string{"--sandboxes", "on", "--kube-agentd-image", "agentd.local/agentd:1"}, kube...), "--kube-agentd-image: the Pods dial the hub over the network: give --sandbox-listen"},
		{[]string{"--sandboxes", "on", "--kube-agentd-image", "agentd.local/agentd:1"}, "--kube-agentd-image is for --sandbox-driver kubernetes"},
		{append([]string{"--sandboxes", "on", "--sandbox-listen", "0.0.0.0:7443"}, kube...), "give --sandbox-advertise HOST:PORT"},
		{append([]string{"--sandboxes", "on", "--sandbox-listen", "127.0.0.1:0"}, kube...), "give --sandbox-advertise HOST:PORT"},
		{append([]string{"--sandboxes", "on", "--sandbox-advertise", "hub-0:7443"}, kube...), "--sandbox-advertise needs --sandbox-listen"},
		{append([]string{"--sandboxes", "on", "--sandbox-listen", "7443"}, kube...), "--sandbox-listen \"7443\": want HOST:PORT"},
		// Placement: parsed before the cluster is dialled; the Docker
		// driver refuses it.
		{append([]string{"--sandboxes", "on", "--kube-node-selector", "pool"}, kube...), `--kube-node-selector: node selector "pool": want KEY=VALUE`},
		{append([]string{"--sandboxes", "on", "--kube-toleration", "pool=sandbox:Never"}, kube...), `--kube-toleration: toleration "pool=sandbox:Never": effect "Never"`},
		{append([]string{"--sandboxes", "on", "--kube-node-selector", "pool=sandbox", "--kube-toleration", "pool:NoSchedule"}, kube...), addr},
		{[]string{"--sandboxes", "on", "--kube-toleration", "pool:NoSchedule"}, "--kube-node-selector and --kube-toleration are for --sandbox-driver kubernetes"},
	} {
		var f sandboxFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		o, closeFn, err := f.options(t.Context(), t.TempDir()+"/hub.db", zaptest.NewLogger(t))
		closeFn()
		switch {
		case tc.want == "" && (err != nil || o.Driver != nil):
			t.Errorf("%v: driver %v, %v; want no sandboxes and no error", tc.args, o.Driver, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
}
