package kube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// The freezer on a cgroup of the test's own (no cluster needed): set
// freezes its task (the kernel says FROZEN, frozen reports it) and thaws
// it; a task killed while frozen ends once thawed.
func TestFreezerOwnCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes a cgroup")
	}
	parent := filepath.Join(cgroupfs, "freezer")
	if unified() {
		parent = cgroupfs
	}
	if _, err := os.Stat(filepath.Join(parent, "cgroup.procs")); err != nil {
		t.Skipf("no freezer hierarchy: %v", err)
	}
	dir := filepath.Join(parent, "agentd-freezer-test-"+randHex(4))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup here: %v", err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := freezer{dir}
	t.Cleanup(func() {
		_ = f.set(context.Background(), false)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if frozen, err := f.frozen(); err != nil || frozen {
		t.Fatalf("a new cgroup: frozen %v, %v", frozen, err)
	}
	if err := f.set(t.Context(), true); err != nil {
		t.Fatalf("freeze: %v", err)
	}
	if st, err := f.state(); err != nil || st != "FROZEN" && st != "frozen 1" {
		t.Errorf("after freeze: %q, %v", st, err)
	}
	if frozen, err := f.frozen(); err != nil || !frozen {
		t.Errorf("frozen after freeze: %v, %v", frozen, err)
	}
	// SIGKILL is held while frozen; the thaw lets it end the task.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := f.set(t.Context(), false); err != nil {
		t.Fatalf("thaw: %v", err)
	}
	if frozen, err := f.frozen(); err != nil || frozen {
		t.Errorf("frozen after thaw: %v, %v", frozen, err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the killed task exited 0")
	}
}
