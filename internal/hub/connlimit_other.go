//go:build !linux

package hub

import "net"

// totalConnCap: no cap derived from the file descriptor limit here (the
// hub is built for Linux; elsewhere it runs for development only).
func totalConnCap() int { return 0 }

// unixPeerKey: peers on the sandboxes' socket cannot be told apart here
// (no SO_PEERCRED), so they count in the total only.
func unixPeerKey(net.Conn) (string, bool) { return unseenPeer, false }
