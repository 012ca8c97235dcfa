package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// forkBytesEnv sets the workspace size of BenchmarkCopyWorkspaceSideBySide
// (default 1 GiB, in 10,000 files).
const forkBytesEnv = "AGENTD_BENCH_FORK_BYTES"

// BenchmarkCopyWorkspaceSideBySide: a fork's copy of a workspace of
// 10,000 files (1 GiB by default) on the host (cp -a between the volumes'
// directories, when it can) and through the helper container
// (Options.CopyInHelper), next to `cp -a` of the same tree on the host into
// the same filesystem, one of each per round (in a rotating order) so that
// a loaded machine slows them alike, each timed until its data is on disk
// (sync). It reports the three times per op and the ratios to cp -a.
//
//	go test -run '^$' -bench CopyWorkspaceSideBySide -benchtime 3x ./internal/sandbox/docker/
func BenchmarkCopyWorkspaceSideBySide(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchCopy(b, 0) })
	b.Run("bounded", func(b *testing.B) { benchCopy(b, 2<<30) })
}

// benchCopy is BenchmarkCopyWorkspaceSideBySide for workspaces of size
// bytes (0: plain volumes).
func benchCopy(b *testing.B, size int64) {
	ctx := context.Background()
	var wsDir string
	if size > 0 {
		if os.Geteuid() != 0 {
			b.Skip("bounded workspaces need root")
		}
		wsDir = b.TempDir()
	}
	d, err := New(Options{WorkspaceDir: wsDir})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.Ping(ctx); errors.Is(err, sandbox.ErrUnavailable) {
		b.Skipf("no docker engine: %v", err)
	}
	helper, err := New(Options{WorkspaceDir: wsDir, CopyInHelper: true})
	if err != nil {
		b.Fatal(err)
	}
	defer helper.Close()
	image := sandboxtest.MinimalImage(b)
	total := int64(1 << 30)
	if v := os.Getenv(forkBytesEnv); v != "" {
		if total, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.Fatalf("%s: %v", forkBytesEnv, err)
		}
	}
	const files = 10000
	tag := make([]byte, 4)
	_, _ = rand.Read(tag)
	hub := "bench-copy-" + hex.EncodeToString(tag)
	spec := func(name string, cmd ...string) sandbox.Spec {
		return sandbox.Spec{
			Name: name, Image: image, Cmd: cmd, Network: "none",
			Labels: map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: hub, sandbox.LabelID: name},
			Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20, Pids: 64, TmpBytes: 8 << 20, HomeBytes: 8 << 20, WorkspaceBytes: size},
		}
	}
	var made []string
	defer func() {
		for _, id := range made {
			if err := d.Remove(context.Background(), id); err != nil {
				b.Errorf("remove %s: %v", id, err)
			}
		}
	}()
	mk := func(name string, cmd ...string) string {
		id, err := d.Create(ctx, spec(name, cmd...))
		if err != nil {
			b.Fatalf("Create: %v", err)
		}
		made = append(made, id)
		return id
	}
	// The source runs and is paused, as a fork's is: a bounded
	// workspace is mounted only while its container runs.
	src := mk(hub+"-src", "sleep", "3600")
	if err := d.Start(ctx, src); err != nil {
		b.Fatal(err)
	}
	srcDir := volumeDir(b, d, src)
	fillTree(b, srcDir, files, total)
	if err := d.Pause(ctx, src); err != nil {
		b.Fatal(err)
	}
	tmp, err := os.MkdirTemp("/var/tmp", "agentd-bench-cpa-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	syncFS(b)
	hostN := &d.hostCopies
	if size > 0 {
		hostN = &d.imageCopies
	}

	var hostT, helperT, cpT time.Duration
	b.ResetTimer()
	for i := range b.N {
		dst := mk(fmt.Sprintf("%s-dst-%d", hub, i), "true")
		dst2 := mk(fmt.Sprintf("%s-dst2-%d", hub, i), "true")
		target := filepath.Join(tmp, strconv.Itoa(i))
		// Each copy's time ends with its data on disk (sync), so that
		// none leaves its writeback to another; the order rotates.
		copyBy := func(d *Driver, dst string, n *atomic.Int64, took *time.Duration) func() {
			return func() {
				began, n0 := time.Now(), n.Load()
				if err := d.CopyWorkspace(ctx, src, dst); err != nil {
					b.Fatalf("CopyWorkspace: %v", err)
				}
				syncFS(b)
				*took += time.Since(began)
				if n.Load() != n0+1 {
					b.Fatalf("the copy did not go the way it was timed for")
				}
			}
		}
		cpa := func() {
			began := time.Now()
			if out, err := exec.Command("cp", "-a", srcDir, target).CombinedOutput(); err != nil {
				b.Fatalf("cp -a: %v %s", err, out)
			}
			syncFS(b)
			cpT += time.Since(began)
		}
		runs := []func(){copyBy(d, dst, hostN, &hostT), copyBy(helper, dst2, &helper.helpers, &helperT), cpa}
		for k := range runs {
			runs[(i+k)%len(runs)]()
		}
		b.StopTimer()
		for _, id := range []string{dst, dst2} {
			if err := d.Remove(ctx, id); err != nil {
				b.Fatalf("Remove: %v", err)
			}
		}
		made = made[:len(made)-2]
		_ = os.RemoveAll(target)
		syncFS(b)
		b.StartTimer()
	}
	b.ReportMetric(hostT.Seconds()/float64(b.N), "host-s/op")
	b.ReportMetric(helperT.Seconds()/float64(b.N), "helper-s/op")
	b.ReportMetric(cpT.Seconds()/float64(b.N), "cp-a-s/op")
	b.ReportMetric(float64(hostT)/float64(cpT), "host/cp-a")
	b.ReportMetric(float64(helperT)/float64(cpT), "helper/cp-a")
}

// volumeDir is the host directory of container id's workspace volume.
func volumeDir(tb testing.TB, d *Driver, id string) string {
	res, err := d.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	vol := workspaceVolume(res.Container.Mounts)
	v, err := d.cli.VolumeInspect(context.Background(), vol, client.VolumeInspectOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return v.Volume.Mountpoint
}

// fillTree writes files files of total bytes in all into dir, 100 per
// directory, owned by the sandbox user.
func fillTree(tb testing.TB, dir string, files int, total int64) {
	rng := mrand.NewChaCha8([32]byte{1})
	size := total / int64(files)
	buf := make([]byte, size)
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.Mkdir(sub, 0o755); err != nil {
				tb.Fatal(err)
			}
			_ = os.Chown(sub, uid, gid)
		}
		_, _ = rng.Read(buf)
		p := filepath.Join(sub, fmt.Sprintf("f%05d", i))
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			tb.Fatal(err)
		}
		_ = os.Chown(p, uid, gid)
	}
}

func syncFS(tb testing.TB) {
	if out, err := exec.Command("sync").CombinedOutput(); err != nil {
		tb.Fatalf("sync: %v %s", err, out)
	}
}
