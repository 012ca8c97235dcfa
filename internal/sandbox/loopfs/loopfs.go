// Package loopfs is what both sandbox drivers use to bound a workspace: an
// ext4 file system in a sparse image file, on a loop device the hub
// attaches, and the sparse copy of such an image with its file system
// frozen (FIFREEZE), so that a running sandbox's workspace is copied
// consistently without stopping it. It knows no engine: the Docker driver
// hands the device to the engine's local volume driver, the Kubernetes
// driver mounts it at a hostPath volume's directory.
//
// Every call needs Linux and root (loop devices, mount, FIFREEZE); off
// Linux they fail with ErrUnsupported.
package loopfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// MinBytes is the smallest image Make makes: ext4's own structures need a
// few MiB.
const MinBytes = 16 << 20

// LoopControl is the host's loop control device.
const LoopControl = "/dev/loop-control"

// ErrNoLoopDevice: the host has no loop device to give a workspace.
var ErrNoLoopDevice = fmt.Errorf("no free loop device: %w", sandbox.ErrExhausted)

// ErrUnsupported: bounded workspaces are loop devices, Linux only.
var ErrUnsupported = errors.New("a bounded workspace needs a Linux host (loop devices)")

// Release undoes Make and Attach for image img and its device symlink dev
// (a removed workspace, or a create that failed): it unmounts the device
// where it is mounted in this mount namespace (thawed first: a hub that
// died during a copy may have left it frozen), detaches it and deletes
// img, dev and a dev.new that Attach left. Nothing there is not an error;
// every step is tried and their errors are joined.
func Release(img, dev string) error {
	var errs []error
	if loop := LoopOf(img, dev); loop != "" {
		if mp, err := MountOf(loop); err == nil && mp != "" {
			Thaw(mp)
			errs = append(errs, Unmount(mp))
		}
		errs = append(errs, Detach(loop))
	}
	for _, p := range []string{dev, dev + ".new", img} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
