package agentd

import (
	"bytes"
	"sync"

	"golang.org/x/sys/unix"
)

// kernelIsolation is "gvisor" when the kernel this process runs on is
// gVisor's: its log (dmesg) opens with "Starting gVisor...", which a
// process of the sandbox cannot write into the host kernel's log (that
// needs CAP_SYSLOG or root on /dev/kmsg); "" otherwise. Read once.
var kernelIsolation = sync.OnceValue(func() string {
	const readAll = 3 // SYSLOG_ACTION_READ_ALL
	buf := make([]byte, 16<<10)
	n, err := unix.Klogctl(readAll, buf)
	if err != nil || n <= 0 {
		return "" // the host's kernel refuses an unprivileged reader
	}
	if bytes.Contains(buf[:n], []byte("Starting gVisor")) {
		return "gvisor"
	}
	return ""
})
