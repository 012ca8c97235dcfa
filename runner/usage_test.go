//go:build linux

package runner

import (
	"testing"
	"time"
)

// TestUsageCountsTheGroup: a running command's group (the shell and the
// busy child it forked) is counted, with its CPU growing; once it exits,
// nothing is.
func TestUsageCountsTheGroup(t *testing.T) {
	m := newTestManager(t, Options{})
	p, err := m.Start(t.Context(), Spec{Argv: []string{"/bin/sh", "-c", "while :; do :; done & sleep 30; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var u Usage
	for {
		u = m.Usage()
		if u.Commands == 1 && u.Processes >= 3 && u.CPUNanos >= 50e6 && u.MemoryBytes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Usage = %+v, want 1 command, ≥3 processes (sh, its busy child, sleep), ≥50 ms CPU, memory", u)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := m.Signal(p.ID(), 9, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(t.Context(), p.ID()); err != nil {
		t.Fatal(err)
	}
	if u := m.Usage(); u.Commands != 0 || u.Processes != 0 || u.CPUNanos != 0 {
		t.Errorf("after the exit: Usage = %+v, want nothing", u)
	}
}
