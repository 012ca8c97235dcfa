package ctl_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

func (f *fakeHub) SandboxStats(context.Context, *hubv1.SandboxStatsRequest) (*hubv1.SandboxStatsResponse, error) {
	return &hubv1.SandboxStatsResponse{Sandboxes: []*hubv1.SandboxUsage{{
		Id: "sb-1", Environment: "builtin", Conversation: "c-1", State: "running", CpuPercent: 12.5,
		MemoryBytes: 100 << 20, MemoryLimit: 512 << 20, Pids: 7, PidsLimit: 256, NetRxBytes: 2048, WorkspaceBytes: -1,
	}}, Machines: []*hubv1.MachineUsage{
		{Id: "m-1", Name: "laptop", Commands: 2, CpuPercent: 150, MemoryBytes: 64 << 20, Processes: 5, Load1: 1.25, Cpus: 8,
			MemoryTotalBytes: 16 << 30, MemoryAvailableBytes: 9 << 30},
		{Id: "m-2", Name: "slow", Error: "deadline exceeded"},
	}}, nil
}

// TestTopFollow: agentctl top, not on a terminal, prints a new table (or
// JSON document) each interval without clearing anything, until Ctrl-C
// ends it with 130; --once prints one.
func TestTopFollow(t *testing.T) {
	f := startFakeHub(t)
	if r := f.run(t, "top", "--once"); r.code != 0 || strings.Count(r.stdout, "ID ") != 1 ||
		!strings.Contains(r.stdout, "sb-1  builtin  c-1           running  12.5%  100.0 MiB / 512.0 MiB  19.5%  7 / 256  2.0 KiB / 0 B  -") {
		t.Errorf("top --once = %+v", r)
	}
	if r := f.run(t, "top", "--once"); !strings.Contains(r.stdout, "m-1      laptop  2         150.0%  64.0 MiB  5      1.25 / 8     9.0 GiB / 16.0 GiB") ||
		!strings.Contains(r.stdout, "m-2      slow    no answer: deadline exceeded") {
		t.Errorf("top --once's machine rows:\n%s", r.stdout)
	}
	for _, tc := range []struct {
		name, sep string
		args      []string
	}{
		{"table", "ID ", []string{"top", "--interval", "1s"}},
		{"json", `{"sampled"`, []string{"--json", "top", "--interval", "1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb := &lockedBuffer{}, &lockedBuffer{}
			sigs := make(chan os.Signal, 1)
			done := make(chan int, 1)
			base := []string{"--addr=", "--machine=", "--env=", "--conversation=", "--hub", f.url, "--token-file", f.tokenFile}
			go func() {
				done <- ctl.Main(t.Context(), append(base, tc.args...), ctl.IO{In: strings.NewReader(""), Out: out, Err: errb, Signals: sigs})
			}()
			eventually(t, 30*time.Second, out, "two samples", func(s string) bool { return strings.Count(s, tc.sep) >= 2 })
			sigs <- os.Interrupt
			if code := <-done; code != 130 {
				t.Errorf("after SIGINT: exit %d, want 130; stderr %q", code, errb.String())
			}
			if s := out.String(); strings.Contains(s, "\x1b[") {
				t.Errorf("top not on a terminal cleared the screen: %q", s)
			}
		})
	}
}
