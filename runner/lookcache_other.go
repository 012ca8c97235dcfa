//go:build !linux

package runner

// newLookCache returns nil: without openat2 a lookup cannot be proven to
// stay on a read-only root, so nothing is cached.
func newLookCache() *lookCache { return nil }
