package docker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// sandboxBase has getent and python3 (busybox's nslookup is not in the
// test images).
const sandboxBase = "ghcr.io/devdepot-ai/sandbox-base:1"

// TestNoContainerNameDNS: two real sandboxes on one network (an internal
// one the test makes: no route out). Neither resolves the other's name
// (its sandbox id) or short container id, a reverse lookup of the other's
// address names nothing, and the engine's embedded DNS does not answer
// when asked directly; /etc/resolv.conf is the host's upstream list. Before,
// all three lookups answered.
func TestNoContainerNameDNS(t *testing.T) {
	d := engine(t)
	if out, err := exec.Command("docker", "image", "inspect", sandboxBase).CombinedOutput(); err != nil {
		t.Skipf("%s is not on the engine (make sandbox-base): %s", sandboxBase, out)
	}
	// The sandboxes' resolver: an address the internal network has no
	// route to, so that no query leaves their namespaces.
	rc := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(rc, []byte("nameserver 198.51.100.53\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := resolvConfCandidates
	resolvConfCandidates = []string{rc}
	t.Cleanup(func() { resolvConfCandidates = saved })
	network := fmt.Sprintf("agentd-test-dns-%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "network", "create", "--internal", "--label", "agentd-test=dns", network).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "network", "rm", network).CombinedOutput(); err != nil {
			t.Errorf("docker network rm %s: %v: %s", network, err, out)
		}
	})
	start := func() (name, id, ip string) {
		s := testSpec(t, "sb-"+uniqueName(t), sandboxBase, "exec sleep 300")
		s.Network = network
		id = create(t, d, s)
		if err := d.Start(t.Context(), id); err != nil {
			t.Fatalf("Start: %v", err)
		}
		res, err := d.cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ep := res.Container.NetworkSettings.Networks[network]
		if ep == nil || !ep.IPAddress.IsValid() {
			t.Fatalf("sandbox %s has no address on %s", s.Name, network)
		}
		return s.Name, id, ep.IPAddress.String()
	}
	_, a, _ := start()
	bName, b, bIP := start()

	script := fmt.Sprintf(`
getent hosts %s && echo "LEAK name"
getent hosts %s && echo "LEAK short id"
python3 - <<'PY'
import socket
try:
    print("LEAK reverse", socket.gethostbyaddr(%q))
except OSError as e:
    print("reverse refused:", type(e).__name__)
# A query for the neighbour's name, straight to the embedded server.
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"".join(bytes([len(l)]) + l.encode() for l in %q.split(".")) + b"\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
try:
    s.sendto(q, ("127.0.0.11", 53))
    print("LEAK embedded DNS answered", len(s.recv(512)))
except OSError as e:
    print("embedded DNS silent:", type(e).__name__)
PY
grep -q 127.0.0.11 /etc/resolv.conf && echo "LEAK resolv.conf names the embedded DNS"
grep -q 198.51.100.53 /etc/resolv.conf || echo "LEAK resolv.conf is not the host's upstream list"
echo end
`, bName, b[:12], bIP, bName)
	out, _ := execIn(t, d, a, script)
	if strings.Contains(out, "LEAK") || !strings.Contains(out, "reverse refused") || !strings.Contains(out, "embedded DNS silent") || !strings.HasSuffix(out, "end") {
		t.Errorf("from one sandbox, lookups of the other (%s, %s, %s):\n%s", bName, b[:12], bIP, out)
	}
	t.Logf("lookups from the neighbour:\n%s", out)
}
