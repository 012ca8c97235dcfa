package runner

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSharedFiles checks what a start does with the files the Manager
// opens once: a command without stdin reads /dev/null, a command gets the
// Manager's OOM score adjustment before Start returns, and after Close
// both files are closed and a start is refused.
func TestSharedFiles(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{ChildOOMScoreAdj: 321})
	res := run(t, m, Spec{Argv: []string{"readlink", "/proc/self/fd/0"}})
	if got := strings.TrimSpace(string(res.out[StreamStdout])); got != os.DevNull {
		t.Errorf("stdin of a command without input is %q, want %s", got, os.DevNull)
	}

	p, err := m.Start(t.Context(), Spec{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(b)), "321"); diff != "" {
		t.Errorf("the command's oom_score_adj (-got +want):\n%s", diff)
	}
	if err := p.Signal(syscall.SIGKILL, 0); err != nil {
		t.Fatal(err)
	}

	devNull, procDir := m.devNull, m.procDir
	if procDir < 0 {
		t.Fatal("no /proc descriptor with ChildOOMScoreAdj set")
	}
	if err := m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := devNull.Stat(); err == nil {
		t.Error("/dev/null still open after Close")
	}
	if _, err := m.Start(t.Context(), Spec{Argv: []string{"true"}}); err == nil {
		t.Error("Start after Close succeeded")
	}
}
