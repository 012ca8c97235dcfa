//go:build !linux && !darwin && !freebsd

package agentd

import (
	"errors"
	"fmt"
	"net"
	"runtime"
)

// peerUID is not available here: this system has no peer credentials on
// unix sockets that agentd reads.
func peerUID(*net.UnixConn) (uint32, error) {
	return 0, fmt.Errorf("peer credentials on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
