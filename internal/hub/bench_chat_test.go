package hub_test

// The chat path against its peer: what a chat back end feels is a
// long-lived client that sends one command after another through the hub;
// the closest thing users compare it with is a persistent ssh connection
// that opens a new session per command. BenchmarkChatPath measures both in
// one loop, alternating, so the machine's noise falls on both alike.
//
// It needs an sshd the caller started (scripts/bench-hub.sh starts one on
// loopback with throwaway keys) and is skipped without one:
//
//	AGENTD_BENCH_SSH=user@127.0.0.1:2222 AGENTD_BENCH_SSH_KEY=/path/user_key \
//	  go test -run '^$' -bench '^BenchmarkChatPath$' -benchtime 300x ./internal/hub/

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/crypto/ssh"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

const (
	benchSSHEnv    = "AGENTD_BENCH_SSH"     // user@host:port of a loopback sshd
	benchSSHKeyEnv = "AGENTD_BENCH_SSH_KEY" // its user's private key (no passphrase)
)

// dialBenchSSH opens the persistent ssh connection, or skips the benchmark.
func dialBenchSSH(b *testing.B) *ssh.Client {
	b.Helper()
	dest, keyPath := os.Getenv(benchSSHEnv), os.Getenv(benchSSHKeyEnv)
	if dest == "" || keyPath == "" {
		b.Skipf("no sshd to compare with: set %s=user@127.0.0.1:PORT and %s=KEY (scripts/bench-hub.sh does)", benchSSHEnv, benchSSHKeyEnv)
	}
	user, addr, ok := strings.Cut(dest, "@")
	if !ok {
		b.Fatalf("%s=%q: want user@host:port", benchSSHEnv, dest)
	}
	if !strings.HasPrefix(addr, "127.") && !strings.HasPrefix(addr, "[::1]") && !strings.HasPrefix(addr, "localhost:") {
		b.Fatalf("%s=%q: the benchmark only talks to loopback", benchSSHEnv, dest)
	}
	pem, err := os.ReadFile(keyPath)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		b.Fatalf("%s: %v", keyPath, err)
	}
	c, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		// A throwaway sshd on loopback that the caller just started.
		HostKeyCallback: ssh.InsecureIgnoreHostKey(),
		Timeout:         10 * time.Second,
	})
	if err != nil {
		b.Fatalf("ssh %s: %v", dest, err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// sshTrue runs `true` in a new session of c. SHLVL=1 tells Debian's bash
// that it is nested, so it skips ~/.bashrc (which would be what is
// measured otherwise; the sshd of scripts/lib/sshd.sh accepts it).
func sshTrue(c *ssh.Client) error {
	s, err := c.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	_ = s.Setenv("SHLVL", "1")
	return s.Run("true")
}

// BenchmarkChatPath: Start ["true"] until Exited through a real hub and
// tunnel on one long-lived gRPC connection, against `true` in a new session
// of one persistent Go ssh connection, alternating. It reports both p50s
// and their ratio (the target is hub/ssh ≤ 0.6).
func BenchmarkChatPath(b *testing.B) {
	sc := dialBenchSSH(b)
	h := newBenchHub(b, zap.NewNop())
	id := h.startDaemon()
	c := agentdv1.NewProcessServiceClient(h.conn())
	ctx := authCtx(b.Context(), h.token, id)
	req := &agentdv1.StartRequest{Argv: []string{"true"}}
	hubTrue := func() error {
		_, x, err := startThroughHub(ctx, c, req)
		if err == nil && x.GetExitCode() != 0 {
			b.Fatalf("true through the hub exited %d", x.GetExitCode())
		}
		return err
	}
	for range 5 { // warm up both
		if err := hubTrue(); err != nil {
			b.Fatalf("true through the hub: %v", err)
		}
		if err := sshTrue(sc); err != nil {
			b.Fatalf("true over ssh: %v", err)
		}
	}
	var hub, sshd []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := hubTrue(); err != nil {
			b.Fatalf("true through the hub: %v", err)
		}
		t1 := time.Now()
		if err := sshTrue(sc); err != nil {
			b.Fatalf("true over ssh: %v", err)
		}
		hub, sshd = append(hub, t1.Sub(t0)), append(sshd, time.Since(t1))
	}
	hp50, sp50 := median(hub), median(sshd)
	b.ReportMetric(ms(hp50), "hub-p50-ms")
	b.ReportMetric(ms(sp50), "ssh-p50-ms")
	b.ReportMetric(ms(percentile(hub, 0.99)), "hub-p99-ms")
	b.ReportMetric(ms(percentile(sshd, 0.99)), "ssh-p99-ms")
	if sp50 > 0 {
		b.ReportMetric(float64(hp50)/float64(sp50), "hub/ssh-p50")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration { return percentile(ds, 0.5) }

// percentile of ds (sorted in place); 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(p*float64(len(ds)-1))]
}
