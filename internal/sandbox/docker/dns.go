package docker

// No container-name DNS for sandboxes on a network.
//
// On a user-defined bridge network the engine's embedded DNS server
// (127.0.0.11 inside every container) answers the names and short ids of
// every container on the network, and PTR queries of their addresses with
// their names: a sandbox learns its neighbours' sandbox ids. Engine 20.10
// has no switch to turn that off for a network, so a sandbox gets:
//
//   - an /etc/resolv.conf of its own, bind-mounted read-only: the host's
//     upstream resolvers (the file Docker itself would copy for its default
//     bridge: /etc/resolv.conf, or systemd-resolved's upstream list when that
//     names only loopback), so names outside resolve as before, through the
//     same egress rules (their AllowDNS) as the embedded server's forwarding;
//   - a drop of all traffic to 127.0.0.11 in the container's own network
//     namespace (an nft table installed from the host after the start, which
//     the container, without CAP_NET_ADMIN, cannot change), so that asking
//     the embedded server directly gets no answer.

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/client"
)

// embeddedDNS is the engine's resolver address inside containers.
const embeddedDNS = "127.0.0.11"

// noDNSTable is the nft table installed in each sandbox's namespace.
const noDNSTable = "table inet agentd_nodns\ndelete table inet agentd_nodns\n" +
	"table inet agentd_nodns {\n\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n" +
	"\t\tip daddr " + embeddedDNS + " drop\n\t}\n}\n"

// resolvConfCandidates are the files whose nameservers sandboxes use, in
// order: the first with a nameserver that is not loopback wins.
var resolvConfCandidates = []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}

// userNetwork reports whether a sandbox on network gets the engine's
// embedded DNS (a user-defined network: not none, host, bridge or a
// container's).
func userNetwork(network string) bool {
	switch {
	case network == "", network == "none", network == "host", network == "bridge", network == "default",
		strings.HasPrefix(network, "container:"):
		return false
	}
	return true
}

// hostResolvConf returns the host file to mount as a sandbox's
// /etc/resolv.conf.
func hostResolvConf() (string, error) {
	for _, f := range resolvConfCandidates {
		path, err := filepath.EvalSymlinks(f)
		if err != nil {
			continue
		}
		if upstream(path) {
			return path, nil
		}
	}
	return "", fmt.Errorf("no upstream DNS resolver: none of %s names a nameserver that is not loopback, and a sandbox cannot reach the host's loopback",
		strings.Join(resolvConfCandidates, ", "))
}

// upstream reports whether the resolv.conf at path names a nameserver
// that is not loopback.
func upstream(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && !a.IsLoopback() {
				return true
			}
		}
	}
	return false
}

// hideNames drops traffic to the embedded DNS server inside the started
// container id; an error means the container must not be used.
func (d *Driver) hideNames(ctx context.Context, id string) error {
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	pid := res.Container.State.Pid
	if pid <= 0 {
		return fmt.Errorf("the container has no process (state %s)", res.Container.State.Status)
	}
	// The pid is the engine host's: on another host (a remote engine) it
	// may name an unrelated local process, whose namespace is not ours to
	// change. The container's cgroup names its id.
	if cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup"); err != nil || !strings.Contains(string(cg), res.Container.ID) {
		return fmt.Errorf("process %d is not the container's on this host (is the engine remote? sandboxes with a network need the engine on the hub's host)", pid)
	}
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/proc/"+strconv.Itoa(pid)+"/ns/net", "--", "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(noDNSTable)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nsenter nft (the hub needs root, nsenter and nft on the engine's host): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
