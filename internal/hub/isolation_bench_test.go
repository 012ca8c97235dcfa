package hub_test

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// BenchmarkIsolation measures the built-in environment under each
// isolation, side by side in one process (make bench-sandbox runs it with
// -benchtime 1x): cold create → first exec of true, a warm-pool sandbox's
// first exec, exec of true in a running sandbox (p50, p99), a 256 MiB write
// through the files API, python3 -c pass, unpacking 10,000 small files, and
// the host memory an idle sandbox takes (its container's cgroup, the
// sentry and gofer included under gVisor).
func BenchmarkIsolation(b *testing.B) {
	for _, iso := range sandboxtest.Isolations {
		b.Run(iso, func(b *testing.B) {
			sandboxtest.RequireIsolation(b, iso)
			for b.Loop() {
				isolationBench(b, iso)
			}
		})
	}
}

func isolationBench(b *testing.B, iso string) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	median := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	setIso := func(h *sbBench) {
		if err := h.store.SetBuiltinIsolation(b.Context(), h.org.ID, iso); err != nil {
			b.Fatal(err)
		}
	}

	// Cold: no warm pool, a new conversation each time.
	h := newSandboxBench(b, nil)
	setIso(h)
	var cold []time.Duration
	for i := range 3 {
		t0 := time.Now()
		h.exec(h.convCtx(hub.BuiltinEnvironment, "cold-"+strconv.Itoa(i)))
		cold = append(cold, time.Since(t0))
	}
	b.ReportMetric(ms(median(cold)), "cold-p50-ms")

	// exec of true in a running sandbox.
	ctx := h.convCtx(hub.BuiltinEnvironment, "cold-0")
	var execs []time.Duration
	for range 200 {
		t0 := time.Now()
		h.exec(ctx)
		execs = append(execs, time.Since(t0))
	}
	slices.Sort(execs)
	b.ReportMetric(ms(execs[len(execs)/2]), "exec-p50-ms")
	b.ReportMetric(ms(execs[len(execs)*99/100]), "exec-p99-ms")

	// Host memory of an idle sandbox: its cgroup, after a moment's rest.
	time.Sleep(2 * time.Second)
	b.ReportMetric(idleMemoryMiB(b, h, "cold-1"), "idle-MiB")

	// 256 MiB through the files API, in 1 MiB chunks.
	t0 := time.Now()
	writeFile(b, h, ctx, "/workspace/big", 256)
	b.ReportMetric(ms(time.Since(t0)), "write-256MiB-ms")

	// python3 -c pass.
	var py []time.Duration
	for range 5 {
		t0 := time.Now()
		runOK(b, h, ctx, "python3", "-c", "pass")
		py = append(py, time.Since(t0))
	}
	b.ReportMetric(ms(median(py)), "python-ms")

	// Unpacking 10,000 small files: the archive made first (untimed).
	runOK(b, h, ctx, "sh", "-c", `mkdir -p /tmp/src && cd /tmp/src && i=0; while [ $i -lt 10000 ]; do echo $i > f$i; i=$((i+1)); done; tar cf /workspace/small.tar -C /tmp src && rm -rf /tmp/src`)
	t0 = time.Now()
	runOK(b, h, ctx, "tar", "xf", "/workspace/small.tar", "-C", "/workspace")
	b.ReportMetric(ms(time.Since(t0)), "untar-10k-ms")

	// Warm pool: a new conversation's first exec when the pool is full.
	w := newSandboxBench(b, func(o *sandboxes.Options) { o.WarmBuiltin = 1 })
	setIso(w)
	w.exec(w.convCtx(hub.BuiltinEnvironment, "warm-up"))
	var warm []time.Duration
	for i := range 3 {
		w.removeConversations()
		w.waitWarm(1)
		t0 := time.Now()
		w.exec(w.convCtx(hub.BuiltinEnvironment, "warm-"+strconv.Itoa(i)))
		warm = append(warm, time.Since(t0))
	}
	w.waitWarm(1)
	b.ReportMetric(ms(median(warm)), "warm-p50-ms")
}

// runOK runs argv in ctx's sandbox and fails b unless it exits 0.
func runOK(b *testing.B, h *sbBench, ctx context.Context, argv ...string) {
	b.Helper()
	if _, x, err := startThroughHub(ctx, h.proc, &agentdv1.StartRequest{Argv: argv}); err != nil || x.GetExitCode() != 0 {
		b.Fatalf("%v: %v %v", argv, x, err)
	}
}

// writeFile writes mib MiB to path through the files API.
func writeFile(b *testing.B, h *sbBench, ctx context.Context, path string, mib int) {
	b.Helper()
	st, err := agentdv1.NewFileServiceClient(h.conn()).Write(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Header{Header: &agentdv1.WriteHeader{Path: path}}}); err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for range mib {
		if err := st.Send(&agentdv1.WriteRequest{Msg: &agentdv1.WriteRequest_Data{Data: chunk}}); err != nil {
			b.Fatal(err)
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil || resp.GetSize() != int64(mib)<<20 {
		b.Fatalf("write %s: %v %v", path, resp, err)
	}
}

// idleMemoryMiB is the memory the cgroup of conv's sandbox container
// charges (memory.usage_in_bytes, or memory.current on cgroup v2): the
// processes' memory and the page cache they caused, the sentry's and
// gofer's (and gVisor's memory file) under gVisor.
func idleMemoryMiB(b *testing.B, h *sbBench, conv string) float64 {
	b.Helper()
	sb, err := h.store.ConversationSandbox(b.Context(), h.org.ID, hub.BuiltinEnvironment, conv)
	if err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", sb.ContainerID).Output()
	if err != nil {
		b.Fatalf("docker inspect: %v", err)
	}
	pid := strings.TrimSpace(string(out))
	// cgroup v1: the memory controller's usage; v2: memory.current.
	script := `l=$(grep ':memory:' /proc/` + pid + `/cgroup | cut -d: -f3); if [ -n "$l" ]; then cat /sys/fs/cgroup/memory$l/memory.usage_in_bytes; ` +
		`else cat /sys/fs/cgroup$(grep '^0::' /proc/` + pid + `/cgroup | cut -d: -f3)/memory.current; fi`
	cg, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		b.Fatalf("the memory cgroup of pid %s: %v", pid, err)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(string(cg)), 64)
	if err != nil {
		b.Fatalf("memory.current %q: %v", cg, err)
	}
	return n / (1 << 20)
}
