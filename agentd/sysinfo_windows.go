package agentd

import (
	"fmt"
	"slices"

	"golang.org/x/sys/windows"
)

// osRelease returns the Windows version ("10.0.19045").
func osRelease() string {
	v := windows.RtlGetVersion()
	return fmt.Sprintf("%d.%d.%d", v.MajorVersion, v.MinorVersion, v.BuildNumber)
}

// diskFree returns the bytes available to the user on the volume of path,
// or 0.
func diskFree(path string) int64 {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0
	}
	var avail, total, free uint64
	if windows.GetDiskFreeSpaceEx(p, &avail, &total, &free) != nil {
		return 0
	}
	return int64(avail)
}

// platformCapabilities returns caps without what the daemon cannot do on
// Windows: ptys and Python sessions (see package runner and runner/pyrun).
func platformCapabilities(caps []string) []string {
	return slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == "pty" || c == "python" })
}
