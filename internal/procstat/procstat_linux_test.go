package procstat

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// A process of a group of its own is found with its group, a resident
// size and at least one thread; this test's own process with its CPU
// time.
func TestEach(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var child, self *Sample
	Each(func(s Sample) {
		switch s.PID {
		case cmd.Process.Pid:
			child = &s
		case os.Getpid():
			self = &s
		}
	})
	if child == nil || child.PGRP != cmd.Process.Pid || child.RSSBytes <= 0 || child.Threads < 1 {
		t.Errorf("the child's sample: %+v; want its own group %d, memory and a thread", child, cmd.Process.Pid)
	}
	for i := 0; self != nil && self.CPUNanos == 0 && i < 50_000_000; i++ {
		if i%10_000_000 == 0 {
			Each(func(s Sample) {
				if s.PID == os.Getpid() {
					self = &s
				}
			})
		}
	}
	if self == nil || self.CPUNanos == 0 || self.Threads < 1 {
		t.Errorf("this process's sample: %+v; want CPU time and threads", self)
	}
}
