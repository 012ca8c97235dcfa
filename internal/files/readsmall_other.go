//go:build !linux

package files

import (
	"errors"
	"io"
	"os"
)

var errNotRegular = errors.New("not a regular file")

// readSmall reads the regular file at path into buf, reusing its capacity,
// when the file holds at most limit bytes; for a larger file it returns
// big and no data.
func readSmall(path string, buf []byte, limit int64) (data []byte, big bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, false, errNotRegular
	}
	if fi.Size() > limit {
		return nil, true, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if int64(len(b)) > limit {
		return nil, true, nil
	}
	return b, false, err
}
