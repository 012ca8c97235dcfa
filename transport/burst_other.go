//go:build !linux

package transport

import "syscall"

// Elsewhere burstConn is not used: reads go straight to the connection.
const canPeekQueued = false

func queued(syscall.RawConn) int { return 0 }
