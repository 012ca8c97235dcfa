package main

import (
	"os/exec"
	"runtime"
	"syscall"
)

// setChildAttrs makes the kernel send the child SIGTERM when agenthub dies
// without stopping it (SIGKILL, a crash), so that no agentd is left behind.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// startChild starts cmd. Pdeathsig fires when the thread that forked the
// child ends, not the process; Go ends a thread only when a goroutine
// locked to it exits, and this one unlocks, so the thread lives on.
func startChild(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}
