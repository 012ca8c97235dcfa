// Package durable writes files the way a crash cannot tear: the new
// content goes to a temporary file in the target's directory, is synced,
// takes its mode, and is renamed over the target, and the directory is
// synced so that the rename itself survives. A reader sees the old file or
// the new one, never a part; after a crash, the same.
//
// The project's writers share these two steps instead of each hand-writing
// them (the agent's file writes in internal/files keep their own temp file,
// which also carries owners, guards and no-replace renames, and use SyncDir).
package durable

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFile replaces path with what write writes, with mode perm, durably
// (see the package doc). On error the target is untouched and the
// temporary file is gone.
func WriteFile(path string, perm fs.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := write(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("%s is written, but its directory could not be synced: %w", path, err)
	}
	return nil
}

// SyncDir makes the names in dir (a rename, a new file) durable. File
// systems that cannot sync a directory are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
