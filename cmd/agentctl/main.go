// Command agentctl drives an agentd: run commands, read and edit files,
// inspect the machine. See `agentctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/devdepot-ai/agentd/internal/ctl"
)

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	winch := make(chan os.Signal, 1)
	notifyWinch(winch)
	code := ctl.Main(context.Background(), os.Args[1:], ctl.IO{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Signals: sigs, Winch: winch,
	})
	os.Exit(code)
}
