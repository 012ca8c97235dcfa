package agentd

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// TestProcessGroupOfExitedLeader: through the ProcessService, a command
// whose leader exits at once and leaves sleepers in its group (a fork
// bomb's shape, bounded) is still stopped by its timeout and by Signal.
// The exited event comes when the leader exits, with its own status.
func TestProcessGroupOfExitedLeader(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	c := agentdv1.NewProcessServiceClient(ts.Conn)
	leftover := func(pidfile string) string {
		var b strings.Builder
		for range 3 {
			b.WriteString("sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> " + pidfile + "; ")
		}
		return b.String() + "exit 0"
	}

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		ev := startAndRead(t, c, &agentdv1.StartRequest{Command: leftover(pidfile), Timeout: durationpb.New(500 * time.Millisecond)})
		if x := ev.exited; x.GetExitCode() != 0 || x.GetTimedOut() {
			t.Errorf("exited = %v, want the leader's exit 0", x)
		}
		for _, pid := range sleeperPids(t, pidfile) {
			if !goneWithin(pid, 10*time.Second) {
				t.Errorf("sleeper %d survived the timeout", pid)
			}
		}
	})
	t.Run("signal", func(t *testing.T) {
		t.Parallel()
		pidfile := filepath.Join(t.TempDir(), "pids")
		ev := startAndRead(t, c, &agentdv1.StartRequest{Command: leftover(pidfile)})
		pids := sleeperPids(t, pidfile)
		if _, err := c.Signal(t.Context(), &agentdv1.SignalRequest{Id: ev.started.GetId(), Signal: "KILL"}); err != nil {
			t.Fatalf("kill of a group whose leader exited: %v", err)
		}
		for _, pid := range pids {
			if !goneWithin(pid, 10*time.Second) {
				t.Errorf("sleeper %d survived KILL", pid)
			}
		}
	})
}

func sleeperPids(t *testing.T, path string) []int {
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
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		t.Fatalf("pids %v, want 3", pids)
	}
	return pids
}

// goneWithin reports whether pid exits within d.
func goneWithin(pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 1
	}
}
