package hub_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/sandbox/docker"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// forkFill writes $1 bytes in 10,000 files under /workspace/src.
const forkFill = `import os, sys
total = int(sys.argv[1]); size = total // 10000; buf = os.urandom(size)
for i in range(10000):
    d = "/workspace/src/d%03d" % (i // 100)
    os.makedirs(d, exist_ok=True)
    with open("%s/f%05d" % (d, i), "wb") as f:
        f.write(buf)
`

// BenchmarkSandboxForkSideBySide: the whole `sandbox fork` of a
// conversation's sandbox whose /workspace holds 10,000 files (1 GiB by
// default, AGENTD_BENCH_FORK_BYTES) — the RPC until the fork's agentd is
// online, then sync — next to `cp -a` of the same tree in the source
// sandbox, then sync, one of each per round. It reports both and the
// ratio: plain workspaces (volumes on the engine's disk), bounded ones
// (ext4 images, as `agenthub serve` makes by default; 3 GiB, so that the
// tree and the baseline's copy of it fit), and, for either, the driver
// told to copy in a helper container (the way it copies when the hub is
// not on the engine's host).
//
//	go test -run '^$' -bench SandboxForkSideBySide -benchtime 3x ./internal/hub/
func BenchmarkSandboxForkSideBySide(b *testing.B) {
	for _, c := range []struct {
		name    string
		bounded bool
		helper  bool
	}{{"plain", false, false}, {"plain-helper", false, true}, {"bounded", true, false}, {"bounded-helper", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			dopts := docker.Options{CopyInHelper: c.helper}
			var tune func(*sandboxes.Options)
			if c.bounded {
				if os.Geteuid() != 0 {
					b.Skip("bounded workspaces need root")
				}
				dopts.WorkspaceDir = b.TempDir()
				tune = func(o *sandboxes.Options) { o.Limits.WorkspaceBytes = 3 << 30 } // the tree and its copy
			}
			benchFork(b, newSandboxBenchOn(b, dopts, tune))
		})
	}
}

func benchFork(b *testing.B, h *sbBench) {
	total := int64(1 << 30)
	if v := os.Getenv("AGENTD_BENCH_FORK_BYTES"); v != "" {
		var err error
		if total, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.Fatal(err)
		}
	}
	ctx := h.convCtx(hub.BuiltinEnvironment, "fork-src")
	run := func(argv ...string) {
		b.Helper()
		if _, x, err := startThroughHub(ctx, h.proc, &agentdv1.StartRequest{Argv: argv, Timeout: durationpb.New(10 * time.Minute)}); err != nil || x.GetExitCode() != 0 {
			b.Fatalf("%v: %v %v", argv, x, err)
		}
	}
	run("python3", "-c", forkFill, strconv.FormatInt(total, 10))
	run("sync")
	src := h.list()[0].GetId()
	admin := authCtx(b.Context(), h.token, "")
	var forkT, cpT time.Duration
	i := 0
	for b.Loop() {
		began := time.Now()
		resp, err := h.envs.ForkSandbox(admin, &hubv1.ForkSandboxRequest{Id: src, Conversation: "fork-" + strconv.Itoa(i)})
		if err != nil {
			b.Fatalf("fork: %v", err)
		}
		if out, err := exec.Command("sync").CombinedOutput(); err != nil {
			b.Fatalf("sync: %v %s", err, out)
		}
		forkT += time.Since(began)
		began = time.Now()
		run("sh", "-c", "cp -a /workspace/src /workspace/copy && sync")
		cpT += time.Since(began)
		b.StopTimer()
		run("rm", "-rf", "/workspace/copy")
		for _, id := range resp.GetIds() {
			if _, err := h.envs.RemoveSandbox(admin, &hubv1.RemoveSandboxRequest{Id: id}); err != nil {
				b.Fatalf("remove the fork: %v", err)
			}
		}
		run("sync")
		b.StartTimer()
		i++
	}
	b.ReportMetric(forkT.Seconds()/float64(i), "fork-s/op")
	b.ReportMetric(cpT.Seconds()/float64(i), "cp-a-s/op")
	b.ReportMetric(float64(forkT)/float64(cpT), "fork/cp-a")
}
