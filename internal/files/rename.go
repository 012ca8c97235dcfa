package files

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// renameCheckFirst renames src to dst unless dst exists. Another process
// can create dst between the check and the rename: use it only where
// RENAME_NOREPLACE is missing.
func renameCheckFirst(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: fs.ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(src, dst)
}

// renameReplace renames src to dst, replacing a file or an empty
// directory at dst. Unlike os.Rename it does not refuse to replace a
// directory.
func renameReplace(src, dst string) error {
	if err := syscall.Rename(src, dst); err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}
