//go:build !linux

package agentd

import "net"

// quickAck is Linux's: elsewhere the kernel's delayed ACKs stay as they are.
func quickAck(*net.TCPConn) {}
