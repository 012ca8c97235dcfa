//go:build !linux

package docker

import (
	"context"
	"errors"
)

// ErrNoDirectWorkspace: the hub cannot read this engine's volumes
// directly; the caller reads the workspace through ExportWorkspace.
var ErrNoDirectWorkspace = errors.New("the workspace volume is not readable from this host")

// MountWorkspace needs Linux.
func (d *Driver) MountWorkspace(ctx context.Context, id string) (string, func() error, error) {
	return "", nil, ErrNoDirectWorkspace
}

func (d *Driver) unmountLeftovers() {}
