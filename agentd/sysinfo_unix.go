//go:build unix

package agentd

import "golang.org/x/sys/unix"

// osRelease returns the kernel release (uname -r), or "".
func osRelease() string {
	var uts unix.Utsname
	if unix.Uname(&uts) != nil {
		return ""
	}
	return unix.ByteSliceToString(uts.Release[:])
}

// diskFree returns the bytes available to the user on the file system of
// path, or 0.
func diskFree(path string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// platformCapabilities returns caps: unix has all of them.
func platformCapabilities(caps []string) []string { return caps }
