// Command agentctl drives an agentd: run commands, read and edit files,
// inspect the machine. See `agentctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/devdepot-ai/agentd/internal/ctl"
)

func main() {
	// agentctl lives for one command and its live heap is small, while a
	// bulk stream allocates a buffer per message: collecting less often
	// than the default saves CPU on large outputs (docs/performance-history.md).
	// GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	winch := make(chan os.Signal, 1)
	notifyWinch(winch)
	code := ctl.Main(context.Background(), os.Args[1:], ctl.IO{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Signals: sigs, Winch: winch,
	})
	os.Exit(code)
}
