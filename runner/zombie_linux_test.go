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

// TestZombieMemberIsNotALiveGroup: a member of the group that has exited
// but is not reaped (its parent, now in a session of its own, never waits;
// or an init that reaps slowly) no longer runs anything, so the process
// has exited for Signal. A zombie answers kill(-pgid, 0), so counting what
// answers made Signal succeed on a finished process (CI failed on
// TestProcessSignalTimeoutPty this way, on a machine whose init reaps
// late).
func TestZombieMemberIsNotALiveGroup(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	dir := t.TempDir()
	zf, pf := filepath.Join(dir, "zombie"), filepath.Join(dir, "parent")
	// The middle shell forks a short sleep (it stays in the group; it ends
	// after the shell exec'd, so no shell reaps it), then
	// leaves the group for a session of its own and never waits: the
	// sleep becomes its zombie. The leader exits once the parent has left.
	inner := `sleep 0.3 & echo \$! > ` + zf + `; exec setsid sh -c 'echo \$\$ > ` + pf + `; exec sleep 300'`
	cmd := `sh -c "` + inner + `" </dev/null >/dev/null 2>&1 & while [ ! -s ` + pf + ` ]; do sleep 0.01; done; exit 0`
	p, err := m.Start(t.Context(), Spec{Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	parent := readPid(t, pf)
	killStray(t, parent)
	zombie := readPid(t, zf)
	for !isZombie(zombie) {
		select {
		case <-ctx.Done():
			t.Fatalf("process %d never became a zombie", zombie)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := syscall.Kill(-p.pid, 0); err != nil {
		t.Fatalf("the zombie does not answer for its group (the test proves nothing): %v", err)
	}
	wantKind(t, p.Signal(syscall.SIGTERM, 0), errs.Precondition, "has already exited")
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}
