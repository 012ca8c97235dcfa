//go:build !linux

package archive

// sync does nothing: the hub ships for Linux only (packaging/README.md),
// and elsewhere a file:// store relies on the system's write-back.
func (s *Store) sync() error { return nil }
