package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoStop: the demo stays up after its script; Ctrl-C (SIGINT to
// agenthub alone, not its process group, so the demo must stop its
// children itself) ends it with exit 0, no agentd left and its temp dir
// gone. A SIGKILL, which the demo cannot handle, still leaves no agentd:
// the kernel sends the child SIGTERM when its parent dies.
func TestDemoStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signal os.Signal
	}{
		{"ctrl-c", os.Interrupt},
		{"sigkill", os.Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := demoCmd(t, filepath.Join(toolsDir, "agenthub"))
			if tc.signal == os.Kill {
				// A SIGKILLed demo cannot remove its sandboxes: this case
				// runs without an engine, so that it leaves none behind
				// (each run used to leave the demo-chat sandbox, its
				// volume and its loop device).
				cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errb strings.Builder
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			tmp, transcript := readUntilStayUp(t, stdout)
			t.Cleanup(func() { os.RemoveAll(tmp) }) // what a SIGKILL leaves
			if _, err := os.Stat(tmp); err != nil {
				t.Fatalf("the demo's temp dir: %v", err)
			}
			daemons := ourDaemons(t)
			if len(daemons) != 1 {
				t.Fatalf("%d agentd processes from %s run while the demo is up, want 1:\n%s", len(daemons), toolsDir, transcript)
			}
			go io.Copy(io.Discard, stdout) //nolint:errcheck // drained until the demo exits
			if err := cmd.Process.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			if tc.signal == os.Kill {
				waitGone(t, daemons[0])
				return
			}
			if err != nil {
				t.Fatalf("agenthub demo after Ctrl-C: %v\n%s", err, errb.String())
			}
			if left := ourDaemons(t); len(left) != 0 {
				t.Errorf("agentd %v still runs after the demo ended", left)
			}
			if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the demo's temp dir %s is still there: %v", tmp, err)
			}
		})
	}
}

var removesRE = regexp.MustCompile(`Ctrl-C stops the demo and removes (\S+)\.`)

// readUntilStayUp reads the transcript up to the line that says Ctrl-C
// stops the demo, and returns the temp dir that line names.
func readUntilStayUp(t *testing.T, r io.Reader) (tmp, transcript string) {
	t.Helper()
	var b strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if m := removesRE.FindStringSubmatch(sc.Text()); m != nil {
			if !strings.Contains(b.String(), "In another terminal, try:") || !strings.Contains(b.String(), "agentctl activity -f") {
				t.Errorf("the stay-up text lacks the commands to try:\n%s", b.String())
			}
			return m[1], b.String()
		}
	}
	t.Fatalf("the demo ended before it said it stays up (%v):\n%s", sc.Err(), b.String())
	return "", ""
}

// ourDaemons lists the live processes running the agentd binary this test
// built (zombies excluded: they have exited).
func ourDaemons(t *testing.T) []int {
	t.Helper()
	want, err := filepath.EvalSymlinks(filepath.Join(toolsDir, "agentd"))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && exe == want && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie reports whether pid has exited and waits to be reaped (or is gone).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(s[i+1:], " Z")
}

// waitGone waits (10 s at most) for pid, orphaned by its parent's death,
// to exit: nobody it could tell is left to wait on it.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !zombie(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // leave no orphan behind a failed test
			t.Fatalf("agentd %d still runs 10 s after agenthub was killed", pid)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}
