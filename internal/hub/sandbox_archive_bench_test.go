//go:build linux

package hub_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub"
	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// sbArchiveBytesEnv sets the workspace size of BenchmarkSandboxArchive
// (default 1 GiB, in 10,000 files).
const sbArchiveBytesEnv = "AGENTD_BENCH_ARCHIVE_BYTES"

// BenchmarkSandboxArchive archives a stopped sandbox's workspace of 10,000
// random files (1 GiB by default) into a file:// archive store on the same
// disk, restores it (a call's restore: a fresh container, every sha256
// checked, agentd back), and archives it again unchanged, each next to
// `tar -C WS -cf - . | tar -C NEW -xf -` of the same workspace, the
// baseline, in the same iteration (every archive after a sync: see
// below). The archives read the volume directly
// (Driver.MountWorkspace, Store.PutDir, the restore's basis on the
// re-archive); a second sandbox of as many other random bytes goes the
// engine's way (ExportWorkspace into Put) in the same iteration, for the
// side-by-side ratio. Metrics: MB/s of each, the ratios to tar (targets:
// archive and restore >= 0.5x tar), the re-archive's new bytes in % of
// the workspace (target <= 1 %) and its time against the first
// archive's (target <= 0.2x).
func BenchmarkSandboxArchive(b *testing.B) {
	size := int64(1 << 30)
	if v, err := strconv.ParseInt(os.Getenv(sbArchiveBytesEnv), 10, 64); err == nil && v > 0 {
		size = v
	}
	dir := b.TempDir()
	st, err := archive.Open(b.Context(), (&url.URL{Scheme: "file", Path: filepath.Join(dir, "store")}).String(), archive.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h := newSandboxBench(b, func(o *sandboxes.Options) { o.Archive, o.OrgMaxArchive = st, 0 })
	fill := `import os
n, size = 10000, ` + strconv.FormatInt(size, 10) + `
for i in range(n):
    d = "/workspace/d%03d" % (i // 100)
    os.makedirs(d, exist_ok=True)
    with open("%s/f%05d" % (d, i), "wb") as f:
        f.write(os.urandom(size // n))
`
	for _, conv := range []string{"archive", "archive-export"} {
		ctx := h.convCtx(hub.BuiltinEnvironment, conv)
		if _, x, err := startThroughHub(ctx, h.proc, &agentdv1.StartRequest{Argv: []string{"python3", "-c", fill}}); err != nil || x.GetExitCode() != 0 {
			b.Fatalf("fill the workspace: %v %v", x, err)
		}
	}
	var id, exportID string
	for _, sb := range h.list() {
		switch sb.GetConversation() {
		case "archive":
			id = sb.GetId()
		case "archive-export":
			exportID = sb.GetId()
		}
	}
	admin := authCtx(b.Context(), h.token, "")
	change := func(id, action string) time.Duration {
		if action == sandboxes.ActionArchive && id == exportID {
			sb, err := h.store.Sandbox(context.WithoutCancel(b.Context()), id)
			if err != nil {
				b.Fatal(err)
			}
			h.drv.noMount(sb.ContainerID)
		}
		if action == sandboxes.ActionArchive {
			// Each archive starts as a sandbox archived after days
			// stopped does: the disk written back (else the archive's
			// fsync waits for the restore just before it) and no GC
			// of the org under way (a restore starts one, which holds
			// the org's lock that an archive waits for).
			syscall.Sync()
			for {
				_, err := st.GC(b.Context(), h.org.ID)
				if !errors.Is(err, archive.ErrBusy) {
					break
				}
				time.Sleep(50 * time.Millisecond) // the hub's GC still runs
			}
		}
		if action == sandboxes.ActionRestore {
			// A restore starts as one days after its archive does: the
			// archive's container and volume removed (after the archive
			// call, under the sandbox's lock, which the restore would
			// wait for) and the disk written back.
			// The other sandbox's too, when it is archived.
			for _, x := range []string{id, exportID} {
				sb, err := h.store.Sandbox(context.WithoutCancel(b.Context()), x)
				if err != nil {
					b.Fatal(err)
				}
				if x != id && sb.State != store.SandboxArchived {
					continue
				}
				for deadline := time.Now().Add(2 * time.Minute); ; {
					_, err := h.drv.Inspect(b.Context(), "agentd-"+x)
					if errors.Is(err, sandbox.ErrNotFound) {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("archived sandbox %s: its container is still there after 2m (%v)", x, err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			syscall.Sync()
		}
		t0 := time.Now()
		if _, err := h.envs.ChangeSandboxState(admin, &hubv1.ChangeSandboxStateRequest{Id: id, Action: action}); err != nil {
			b.Fatalf("%s %s: %v", action, id, err)
		}
		return time.Since(t0)
	}
	newBytesOf := func(id string) int64 {
		sb, err := h.store.Sandbox(context.WithoutCancel(b.Context()), id)
		if err != nil {
			b.Fatal(err)
		}
		m, err := st.Get(b.Context(), sb.OrgID, sb.ArchiveID)
		if err != nil {
			b.Fatal(err)
		}
		return m.NewBytes
	}
	mb := float64(size) / 1e6
	var tarD, archD, restD, rearchD, expD, reexpD time.Duration
	var newBytes, expNewBytes int64
	for b.Loop() {
		change(id, sandboxes.ActionStop)
		change(exportID, sandboxes.ActionStop)
		tarD += sbTarCopy(b, "agentd-"+id+"-workspace", filepath.Join(dir, "tar"))
		expD += change(exportID, sandboxes.ActionArchive)
		archD += change(id, sandboxes.ActionArchive)
		restD += change(id, sandboxes.ActionRestore)
		change(id, sandboxes.ActionStop)
		rearchD += change(id, sandboxes.ActionArchive)
		newBytes += newBytesOf(id)
		change(exportID, sandboxes.ActionRestore)
		change(exportID, sandboxes.ActionStop)
		reexpD += change(exportID, sandboxes.ActionArchive)
		expNewBytes += newBytesOf(exportID)
		change(id, sandboxes.ActionRestore)
		change(exportID, sandboxes.ActionRestore)
	}
	n := float64(b.N)
	b.ReportMetric(mb*n/tarD.Seconds(), "tar-MB/s")
	b.ReportMetric(mb*n/archD.Seconds(), "archive-MB/s")
	b.ReportMetric(mb*n/expD.Seconds(), "archive-export-MB/s")
	b.ReportMetric(mb*n/restD.Seconds(), "restore-MB/s")
	b.ReportMetric(tarD.Seconds()/archD.Seconds(), "archive/tar-x")
	b.ReportMetric(tarD.Seconds()/expD.Seconds(), "archive-export/tar-x")
	b.ReportMetric(tarD.Seconds()/restD.Seconds(), "restore/tar-x")
	b.ReportMetric(float64(newBytes)/n/float64(size)*100, "rearchive-new-%")
	b.ReportMetric(float64(expNewBytes)/n/float64(size)*100, "rearchive-export-new-%")
	b.ReportMetric(rearchD.Seconds()/archD.Seconds(), "rearchive/archive-x")
	b.ReportMetric(reexpD.Seconds()/expD.Seconds(), "rearchive-export/archive-export-x")
	for _, e := range h.logs.FilterMessage("sandbox archived").All() {
		c := e.ContextMap()
		b.Logf("archived %v: read %v, took %v (put %v, verify %v), new bytes %v", c["sandbox"], c["read"], c["took"], c["put_took"], c["verify_took"], c["new_bytes"])
	}
	b.Logf("load %s; tar %v, archive %v (export %v), restore %v, re-archive %v (export %v)", sbLoad(), tarD, archD, expD, restD, rearchD, reexpD)
}

// sbLoad is the machine's load average, for the log.
func sbLoad() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return string(bytes.TrimSpace(b))
}

// sbTarCopy copies a Docker volume's content (on this host: the benchmark
// runs as root beside the engine) with tar into a new directory, and
// returns how long it took.
func sbTarCopy(b *testing.B, volume, to string) time.Duration {
	out, err := exec.CommandContext(b.Context(), "docker", "volume", "inspect", "--format", "{{.Mountpoint}}", volume).Output()
	if err != nil {
		b.Fatalf("docker volume inspect %s: %v", volume, err)
	}
	src := string(out[:len(out)-1])
	_ = os.RemoveAll(to)
	if err := os.MkdirAll(to, 0o755); err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(to)
	t0 := time.Now()
	if out, err := exec.CommandContext(b.Context(), "sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf -`, "sh", src, to).CombinedOutput(); err != nil {
		b.Fatalf("tar: %v %s", err, out)
	}
	return time.Since(t0)
}
