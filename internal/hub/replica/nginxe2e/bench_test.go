package nginxe2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkStdoutThroughNginx: 256 MiB of a command's stdout (head -c
// /dev/zero) to a whole `agentctl sh` process, four ways, interleaved in
// every iteration so that a noisy machine weighs on all of them alike:
// straight to the replica holding the tunnel, through nginx to it, straight
// to another replica (which forwards), and through nginx to that one. The
// daemon's tunnel goes through nginx in all four. Reported: MB/s of each,
// and the ratios of nginx's to the direct ones.
func BenchmarkStdoutThroughNginx(b *testing.B) {
	const size = 256 << 20
	c := startCluster(b)
	m := c.pairMachine(b)
	h := c.holder(b)
	other := c.nextAfter(h)
	script := fmt.Sprintf("head -c %d /dev/zero", size)
	ways := []struct {
		name   string
		target *replica
		nginx  bool
		took   time.Duration
	}{
		{name: "holder", target: h},
		{name: "nginx-holder", target: h, nginx: true},
		{name: "forwarded", target: other},
		{name: "nginx-forwarded", target: other, nginx: true},
	}
	n := 0
	for b.Loop() {
		n++
		for i := range ways {
			w := &ways[i]
			hub := w.target.URL()
			if w.nginx {
				c.steer(b, m, w.target)
				hub = c.URL
			}
			out := newHashWriter(1 << 62)
			cmd := exec.CommandContext(b.Context(), bin("agentctl"), "--hub", hub, "--machine", m.id, "sh", script)
			cmd.Env = c.clientEnv(b, "agentctl")
			cmd.Stdout = out
			start := time.Now()
			if err := cmd.Run(); err != nil || out.n.Load() != size {
				b.Fatalf("agentctl sh to %s: %v, %d bytes", hub, err, out.n.Load())
			}
			w.took += time.Since(start)
		}
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(n) / d.Seconds() / 1e6 }
	for _, w := range ways {
		b.ReportMetric(mbps(w.took), w.name+"-MB/s")
	}
	b.ReportMetric(float64(ways[1].took)/float64(ways[0].took), "nginx/direct-holder")
	b.ReportMetric(float64(ways[3].took)/float64(ways[2].took), "nginx/direct-forwarded")
	b.ReportMetric(float64(ways[2].took)/float64(ways[0].took), "forwarded/holder")
}
