package main

import "os"

// notifyWinch does nothing on Windows: consoles send no SIGWINCH, so a
// remote pty keeps the size it was started with.
func notifyWinch(chan<- os.Signal) {}
