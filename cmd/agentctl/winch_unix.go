//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyWinch relays terminal window size changes (SIGWINCH) to c.
func notifyWinch(c chan<- os.Signal) { signal.Notify(c, syscall.SIGWINCH) }
