//go:build !linux

package conns

import "net"

// TotalCap is 0 (no cap) here: no cap derived from the file descriptor
// limit (the hub is built for Linux; elsewhere it runs for development
// only).
func TotalCap() int { return 0 }

// UnixPeerKey is the KeyFunc of the sandboxes' unix socket: peers cannot
// be told apart here (no SO_PEERCRED), so they count in the total only.
func UnixPeerKey(net.Conn) (string, bool) { return unseenPeer, false }
