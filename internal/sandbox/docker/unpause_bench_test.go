package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/sandboxtest"
)

// BenchmarkUnpauseSideBySide: where a paused sandbox's resume goes. One
// of each per round, on one running container: the driver's Unpause (the
// engine: dockerd → containerd → the shim → `runc resume`, which writes
// THAWED to the container's freezer cgroup), and the write of THAWED to
// that cgroup by this process alone (cgroup v1, root). The second is not
// a way the driver can take: runc then finds the container not frozen,
// refuses the engine's unpause ("container not paused") and the engine
// says "paused" for good; so each round puts the engine back (freeze
// through the cgroup again, then the engine's unpause), untimed. It
// reports the p50 and p90 of both.
//
//	go test -run '^$' -bench UnpauseSideBySide -benchtime 30x ./internal/sandbox/docker/
func BenchmarkUnpauseSideBySide(b *testing.B) {
	ctx := context.Background()
	d, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.Ping(ctx); errors.Is(err, sandbox.ErrUnavailable) {
		b.Skipf("no docker engine: %v", err)
	}
	image := sandboxtest.MinimalImage(b)
	tag := make([]byte, 4)
	_, _ = rand.Read(tag)
	name := "bench-unpause-" + hex.EncodeToString(tag)
	id, err := d.Create(ctx, sandbox.Spec{
		Name: name, Image: image, Cmd: []string{"sleep", "3600"}, Network: "none",
		Labels: map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: name, sandbox.LabelID: name},
		Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 64 << 20, Pids: 64, TmpBytes: 8 << 20, HomeBytes: 8 << 20},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := d.Remove(context.Background(), id); err != nil {
			b.Errorf("remove %s: %v", id, err)
		}
	}()
	if err := d.Start(ctx, id); err != nil {
		b.Fatal(err)
	}
	state := filepath.Join("/sys/fs/cgroup/freezer/docker", id, "freezer.state")
	if _, err := os.Stat(state); err != nil {
		b.Skipf("no cgroup v1 freezer of the container here (%v): the engine's unpause alone is not compared", err)
	}
	setState := func(s string) {
		if err := os.WriteFile(state, []byte(s), 0); err != nil {
			b.Fatal(err)
		}
		for {
			got, err := os.ReadFile(state)
			if err != nil {
				b.Fatal(err)
			}
			if strings.TrimSpace(string(got)) == s {
				return
			}
		}
	}
	var engine, cgroup []time.Duration
	for b.Loop() {
		if err := d.Pause(ctx, id); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := d.Unpause(ctx, id); err != nil {
			b.Fatal(err)
		}
		engine = append(engine, time.Since(t0))

		b.StopTimer()
		if err := d.Pause(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 = time.Now()
		setState("THAWED")
		cgroup = append(cgroup, time.Since(t0))
		b.StopTimer()
		setState("FROZEN") // what the engine believes, so that its unpause works
		if err := d.Unpause(ctx, id); err != nil {
			b.Fatal(err)
		}
		res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil || res.Container.State.Paused {
			b.Fatalf("the engine's view after the round: %v, paused %v", err, res.Container.State != nil && res.Container.State.Paused)
		}
		b.StartTimer()
	}
	q := func(ds []time.Duration, p float64) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(engine, 0.5), "engine-p50-ms")
	b.ReportMetric(q(engine, 0.9), "engine-p90-ms")
	b.ReportMetric(q(cgroup, 0.5), "cgroup-p50-ms")
	b.ReportMetric(q(cgroup, 0.9), "cgroup-p90-ms")
}
