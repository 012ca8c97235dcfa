package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// maxInitFile bounds one file sandbox-init copies from a directory (a key,
// a CA bundle): anything larger is not what the hub put there.
const maxInitFile = 1 << 20

// newSandboxInitCmd is the init container of a sandbox Pod on Kubernetes
// (internal/sandbox/kube): the image holds this binary alone, and it copies
// itself into the emptyDir the sandbox container mounts read-only at
// /opt/agentd, and the files of the sandbox's key and CA (a Secret volume
// only this container mounts) into memory-backed emptyDirs, where agentd
// can remove its key once read, as it does on a hostPath mount. Being
// agentd itself, the copy needs no shell or coreutils in the image.
func newSandboxInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sandbox-init BIN [SRC_DIR=DST_DIR]...",
		Short:  "Copy this binary to BIN and each SRC_DIR's files into DST_DIR (a Kubernetes sandbox's init container)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return sandboxInit(args[0], args[1:])
		},
	}
}

// sandboxInit copies the running executable to bin (mode 0555) and, for
// each "SRC=DST", the regular files directly in SRC (symlinks followed, as
// a Secret volume's are; names starting with a dot skipped) into DST.
func sandboxInit(bin string, dirs []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sandbox-init: %w", err)
	}
	if err := copyFile(exe, bin, 0o555, -1); err != nil {
		return fmt.Errorf("sandbox-init: %w", err)
	}
	for _, d := range dirs {
		src, dst, ok := strings.Cut(d, "=")
		if !ok || src == "" || dst == "" {
			return usageError{fmt.Errorf("sandbox-init: %q: want SRC_DIR=DST_DIR", d)}
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return fmt.Errorf("sandbox-init: %w", err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue // a Secret volume's ..data and its timestamped dirs
			}
			if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), 0o444, maxInitFile); err != nil {
				return fmt.Errorf("sandbox-init: %w", err)
			}
		}
	}
	return nil
}

// copyFile copies the regular file src (following symlinks) to dst with
// mode, through a temporary file renamed into place; limit >= 0 bounds its
// size.
func copyFile(src, dst string, mode os.FileMode, limit int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if limit >= 0 && st.Size() > limit {
		return fmt.Errorf("%s: %d bytes, more than %d", src, st.Size(), limit)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".sandbox-init-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, in)
	err = errors.Join(err, tmp.Chmod(mode), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}
