package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Stats takes one sample from the engine's one-shot stats (no second
// sample: the caller keeps the previous one for CPU).
func (d *Driver) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	res, err := d.cli.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return sandbox.Stats{}, d.fail("stats of container "+id, err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return sandbox.Stats{}, fmt.Errorf("stats of container %s: %w", id, err)
	}
	return stats(s), nil
}

// stats converts the engine's sample; a container that does not run has
// a zero read time and gives an empty Stats.
func stats(s container.StatsResponse) sandbox.Stats {
	if s.Read.IsZero() {
		return sandbox.Stats{}
	}
	mem := s.MemoryStats.Usage
	// As docker stats: without the page cache (cgroup v2: inactive_file;
	// v1: total_inactive_file).
	inactive, ok := s.MemoryStats.Stats["inactive_file"]
	if !ok {
		inactive = s.MemoryStats.Stats["total_inactive_file"]
	}
	if inactive < mem {
		mem -= inactive
	}
	out := sandbox.Stats{
		Read:        s.Read,
		CPUNanos:    s.CPUStats.CPUUsage.TotalUsage,
		MemoryBytes: clamp(mem),
		MemoryLimit: clamp(s.MemoryStats.Limit),
		Pids:        clamp(s.PidsStats.Current),
		PidsLimit:   clamp(s.PidsStats.Limit),
	}
	for _, n := range s.Networks {
		out.NetRxBytes += clamp(n.RxBytes)
		out.NetTxBytes += clamp(n.TxBytes)
	}
	return out
}

func clamp(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
