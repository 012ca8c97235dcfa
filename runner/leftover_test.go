//go:build unix

package runner

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// leftoverCommand starts n sleepers in the background of the shell's
// process group (no setsid: they stay in the group), writes their pids to
// pidfile and exits at once, like a fork bomb's leader. The sleepers do
// not hold the output open, so the process finishes when the shell exits.
func leftoverCommand(pidfile string, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString("sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> " + pidfile + "; ")
	}
	b.WriteString("exit 0")
	return b.String()
}

// readPids reads the pids leftoverCommand wrote and kills them at the end
// of the test whatever happens.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %q: %v", b, err)
		}
		killStray(t, pid)
		pids = append(pids, pid)
	}
	return pids
}

// TestTimeoutKillsGroupOfExitedLeader: the leader exits at once and leaves
// its group running; at the timeout the whole group dies all the same. The
// exited event still comes when the leader exits, with its own status.
func TestTimeoutKillsGroupOfExitedLeader(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	pidfile := filepath.Join(t.TempDir(), "pids")
	const timeout = 500 * time.Millisecond
	start := time.Now()
	res := run(t, m, Spec{Command: leftoverCommand(pidfile, 3), Timeout: timeout, Grace: 200 * time.Millisecond})
	pids := readPids(t, pidfile)
	if res.exit.Code != 0 || res.exit.TimedOut || res.exit.Signal != "" {
		t.Errorf("exit = %+v, want the leader's own exit 0", res.exit)
	}
	if len(pids) != 3 {
		t.Fatalf("%d sleepers started, want 3", len(pids))
	}
	for _, pid := range pids {
		if !processGoneWithin(pid, 10*time.Second) {
			t.Errorf("sleeper %d of the group survived the timeout", pid)
		}
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("the group died after %v, before the timeout of %v", d, timeout)
	}
}

// TestSignalReachesGroupOfExitedLeader: kill reaches the group of a
// process whose leader has exited while members of the group live; once
// none lives, signalling it is refused as before.
func TestSignalReachesGroupOfExitedLeader(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(SignalName(sig), func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t, Options{})
			pidfile := filepath.Join(t.TempDir(), "pids")
			p, err := m.Start(t.Context(), Spec{Command: leftoverCommand(pidfile, 2)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if _, err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			pids := readPids(t, pidfile)
			if err := p.Signal(sig, 0); err != nil {
				t.Fatalf("Signal %s to the group of an exited leader: %v", SignalName(sig), err)
			}
			for _, pid := range pids {
				if !processGoneWithin(pid, 10*time.Second) {
					t.Errorf("sleeper %d survived %s", pid, SignalName(sig))
				}
			}
			// The killed sleepers are zombies until their new parent reaps
			// them, and a zombie still counts as a member of the group.
			err = p.Signal(sig, 0)
			for deadline := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(deadline); err = p.Signal(sig, 0) {
				time.Sleep(10 * time.Millisecond)
			}
			wantKind(t, err, errs.Precondition, "has already exited")
		})
	}
}

// TestCloseKillsGroupOfExitedLeader: closing the Manager stops what an
// exited leader left in its group, as it stops running processes.
func TestCloseKillsGroupOfExitedLeader(t *testing.T) {
	t.Parallel()
	m := New(Options{Dir: t.TempDir(), Shell: "/bin/sh"})
	pidfile := filepath.Join(t.TempDir(), "pids")
	p, err := m.Start(t.Context(), Spec{Command: leftoverCommand(pidfile, 2)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	pids := readPids(t, pidfile)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !processGoneWithin(pid, 10*time.Second) {
			t.Errorf("sleeper %d survived Close", pid)
		}
	}
}
