//go:build linux

package egress

// Test fixtures on the real engine and kernel: a busybox image made without
// a registry, a network namespace with its own addresses, listeners that
// hand out a token, and probes from a container. Traffic goes only to what
// these helpers create.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

// testImage is the probe image: static busybox and a few applets.
const testImage = "agentd-test/egress:1"

// requireEnv skips unless the test runs as root with a reachable Docker
// engine, and fails when a tool the tests need is missing.
func requireEnv(t *testing.T) *client.Client {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: installs nftables rules and makes network namespaces")
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Skipf("Docker unreachable: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Skipf("Docker unreachable: %v", err)
	}
	for _, tool := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (install nftables and iproute2): %v", tool, err)
		}
	}
	return cli
}

// run runs a command and fails the test with its output when it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cleanupCtx is for t.Cleanup, where t.Context is already cancelled.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// clean removes what an earlier, killed run of a test may have left under
// the same names: the network with its containers, and the rules. It runs
// before a test and again in its cleanup.
func clean(t *testing.T, cli *client.Client, o Options) {
	t.Helper()
	ctx, cancel := cleanupCtx()
	defer cancel()
	if res, err := cli.NetworkInspect(ctx, o.NetworkName, client.NetworkInspectOptions{}); err == nil {
		for id := range res.Network.Containers {
			if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Errorf("remove container %s: %v", id, err)
			}
		}
		if _, err := cli.NetworkRemove(ctx, res.Network.ID, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove network %s: %v", o.NetworkName, err)
		}
	}
	if _, err := (nft{path: "nft"}).run(ctx, removeScript(tableName(o.BridgeName)), "-f", "-"); err != nil {
		t.Errorf("remove rules: %v", err)
	}
}

// buildImage imports the probe image from a tar made here: Debian's static
// busybox (package busybox-static) and symlinks for the applets used.
func buildImage(t *testing.T, cli *client.Client) {
	t.Helper()
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox is needed for the probe image (apt-get install busybox-static): %v", err)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("/bin/busybox: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("/bin/busybox is dynamically linked and cannot run in an empty image: apt-get install busybox-static")
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin/", "tmp/"} {
		must(tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}))
	}
	must(tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))}))
	_, err = tw.Write(bin)
	must(err)
	for _, applet := range []string{"sh", "nc", "sleep"} {
		must(tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}))
	}
	must(tw.Close())

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, testImage, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("import %s: %v", testImage, err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || bytes.Contains(body, []byte(`"error"`)) {
		t.Fatalf("import %s: %v %s", testImage, err, body)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if _, err := cli.ImageRemove(ctx, testImage, client.ImageRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove image: %v", err)
		}
	})
}

// Addresses of the test's own network namespace. The host's end of the
// veth holds 10.250.77.1/24 and 203.0.113.1/24: two on-link networks, one
// private and one a LAN that is not RFC 1918 (TEST-NET-3), whose neighbour
// in the namespace (.2 of each) no sandbox may reach. The namespace also
// holds nsPublic, which the host reaches through a route via the LAN
// neighbour (not on-link): an address the rules treat as public, which
// sandboxes must reach. So the host routes all three to the namespace and
// nowhere else.
var (
	nsPrivate   = netip.MustParsePrefix("10.250.77.2/24")
	nsLAN       = netip.MustParsePrefix("203.0.113.2/24")
	nsPublic    = netip.MustParsePrefix("198.51.100.2/32")
	hostPrivate = netip.MustParsePrefix("10.250.77.1/24")
	hostLAN     = netip.MustParsePrefix("203.0.113.1/24")
	// hostLate is added to the host's end after Ensure (a single address:
	// no new on-link network).
	hostLate = netip.MustParsePrefix("192.0.2.3/32")
)

const (
	nsName = "agentd-egt"
	vethH  = "agentd-egth"
	vethN  = "agentd-egtn"
)

// newNetns makes the namespace and its veth pair, and checks that the host
// routes each of the namespace's addresses to the veth before any traffic
// is sent there.
func newNetns(t *testing.T) {
	t.Helper()
	removeNetns := func() {
		_ = exec.Command("ip", "netns", "del", nsName).Run()
		_ = exec.Command("ip", "link", "del", vethH).Run()
	}
	removeNetns()
	t.Cleanup(removeNetns)
	run(t, "ip", "netns", "add", nsName)
	run(t, "ip", "link", "add", vethH, "type", "veth", "peer", "name", vethN, "netns", nsName)
	run(t, "ip", "addr", "add", hostPrivate.String(), "dev", vethH)
	run(t, "ip", "addr", "add", hostLAN.String(), "dev", vethH)
	run(t, "ip", "link", "set", vethH, "up")
	run(t, "ip", "-n", nsName, "addr", "add", nsPrivate.String(), "dev", vethN)
	run(t, "ip", "-n", nsName, "addr", "add", nsLAN.String(), "dev", vethN)
	run(t, "ip", "-n", nsName, "addr", "add", nsPublic.String(), "dev", vethN)
	run(t, "ip", "-n", nsName, "link", "set", vethN, "up")
	run(t, "ip", "-n", nsName, "link", "set", "lo", "up")
	run(t, "ip", "route", "add", nsPublic.String(), "via", nsLAN.Addr().String(), "dev", vethH)
	for _, p := range []netip.Prefix{nsPrivate, nsLAN, nsPublic} {
		if out := run(t, "ip", "-o", "route", "get", p.Addr().String()); !strings.Contains(out, "dev "+vethH+" ") {
			t.Fatalf("the host does not route %s to %s, refusing to send traffic there: %s", p.Addr(), vethH, out)
		}
	}
}

// listenInNetns opens a TCP listener on every address of the namespace. The
// socket is made on a thread switched into the namespace and stays there;
// the thread switches back, or dies with its goroutine if it cannot.
func listenInNetns(t *testing.T) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", nsName))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in %s: %v", nsName, r.err)
	}
	return r.ln
}

// tokenServer answers every connection with its token and closes it, so a
// client that prints the token has reached exactly this listener.
type tokenServer struct {
	token    string
	port     uint16
	accepted atomic.Int64
}

// serve runs a tokenServer on ln until the test ends.
func serve(t *testing.T, ln net.Listener) *tokenServer {
	t.Helper()
	s := &tokenServer{token: "agentd-egress-" + rand.Text()[:12], port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			_, _ = io.WriteString(c, s.token+"\n")
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return s
}

// hostReaches checks from the host that to answers with the server's token.
func hostReaches(t *testing.T, to netip.AddrPort, s *tokenServer) {
	t.Helper()
	c, err := net.DialTimeout("tcp4", to.String(), 5*time.Second)
	if err != nil {
		t.Fatalf("from the host, %s: %v", to, err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || strings.TrimSpace(string(got)) != s.token {
		t.Fatalf("from the host, %s: read %q, %v; want the token", to, got, err)
	}
}

// probe runs `nc -w 2 ADDR PORT` in a new container on network and returns
// its output and exit code; the container is removed.
func probe(t *testing.T, cli *client.Client, network string, to netip.AddrPort) (string, int64) {
	t.Helper()
	return probeOn(t, cli, network, "", to)
}

// probeOn is probe on an engine runtime ("": the default, runc).
func probeOn(t *testing.T, cli *client.Client, network, runtime string, to netip.AddrPort) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image: testImage,
			Cmd:   []string{"nc", "-w", "2", to.Addr().String(), strconv.Itoa(int(to.Port()))},
		},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(network), Runtime: runtime},
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
	t.Logf("probe nc %s: exit %d, output %q", to, code, out.String())
	return out.String(), code
}
