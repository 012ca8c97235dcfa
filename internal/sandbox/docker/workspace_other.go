//go:build !linux

package docker

import (
	"context"
	"fmt"

	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// ErrNoLoopDevice: the host has no loop device to give a workspace.
var ErrNoLoopDevice = loopfs.ErrNoLoopDevice

// createBoundedVolume: bounded workspaces are loop devices, Linux only.
func (d *Driver) createBoundedVolume(ctx context.Context, vol string, labels map[string]string, size int64) error {
	return fmt.Errorf("create volume %s: a workspace size limit needs a Linux host (loop devices)", vol)
}

func (d *Driver) releaseWorkspace(vol string) error { return nil }

// RecoverWorkspaces has nothing to do off Linux.
func (d *Driver) RecoverWorkspaces(ctx context.Context) error { return nil }

// copyImage: bounded workspaces are loop devices, Linux only.
func (d *Driver) copyImage(ctx context.Context, srcVol, dstVol string) (bool, error) {
	return false, nil
}
