//go:build !unix

package snapshot

import "os"

// openSource opens a file of the tree for reading.
func openSource(name string) (*os.File, error) { return os.Open(name) }
