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
