package runner

import (
	"errors"

	"golang.org/x/sys/unix"
)

// newLookCache returns a cache of PATH lookups on the root filesystem, or
// nil (no cache) unless the root is mounted read-only. A read-only mount
// stays so: making it writable again takes CAP_SYS_ADMIN, which a
// sandbox's processes do not have.
func newLookCache() *lookCache {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(root)
	var st unix.Statfs_t
	if unix.Fstatfs(root, &st) != nil || st.Flags&unix.ST_RDONLY == 0 {
		return nil
	}
	return &lookCache{probe: onReadOnlyRoot, m: make(map[string]lookResult)}
}

// onReadOnlyRoot reports whether looking path up never leaves the root
// mount (RESOLVE_NO_XDEV: no mount point crossed, through symbolic links
// either), so that what it finds, or that nothing is there, is fixed for
// as long as the root is read-only. Any other outcome — another mount
// (a tmpfs, a volume, a bind mount), no openat2, no permission — is
// "not proven" and the path is checked every time.
func onReadOnlyRoot(path string) bool {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == nil {
		unix.Close(fd)
		return true
	}
	// A component missing on the read-only root can never appear there.
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}
