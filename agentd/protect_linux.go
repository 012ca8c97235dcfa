package agentd

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ProtectFromWorkload makes the daemon non-dumpable, so that processes of
// the same uid — the commands it runs in a sandbox — can neither ptrace it
// nor read its /proc/PID/environ, mem, maps or fd links (they become
// root's). Called before the daemon reads its key. The commands it starts
// are dumpable again: exec resets the flag for a normal binary.
func ProtectFromWorkload() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make agentd non-dumpable: %w", err)
	}
	return nil
}
