//go:build !unix

package files

import "io"

// holdOld holds nothing here: on Windows an open handle would make the
// rename over the file fail.
func holdOld(string) io.Closer { return nil }
