//go:build !linux

package loopfs

import (
	"context"
	"os"
)

// Make: ErrUnsupported off Linux.
func Make(ctx context.Context, img string, size int64, uid, gid int) error { return ErrUnsupported }

// Attach: ErrUnsupported off Linux.
func Attach(loopControl, img, dev string) (string, error) { return "", ErrUnsupported }

// Detach: ErrUnsupported off Linux.
func Detach(path string) error { return ErrUnsupported }

// Backing: nothing off Linux.
func Backing(path string) string { return "" }

// LoopOf: nothing off Linux.
func LoopOf(img, dev string) string { return "" }

// MountOf: nothing off Linux.
func MountOf(dev string) (string, error) { return "", nil }

// Freeze: ErrUnsupported off Linux.
func Freeze(mp string) (func() error, error) { return nil, ErrUnsupported }

// Thaw does nothing off Linux.
func Thaw(mp string) {}

// CopySparse: ErrUnsupported off Linux.
func CopySparse(ctx context.Context, src, dst string, size int64) error { return ErrUnsupported }

// FlushBuffers: ErrUnsupported off Linux.
func FlushBuffers(dev string) error { return ErrUnsupported }

// FlushOpen: ErrUnsupported off Linux.
func FlushOpen(f *os.File) error { return ErrUnsupported }

// Mount: ErrUnsupported off Linux.
func Mount(dev, dir string) error { return ErrUnsupported }

// Unmount: ErrUnsupported off Linux.
func Unmount(dir string) error { return ErrUnsupported }

// CopyImage: ErrUnsupported off Linux.
func CopyImage(ctx context.Context, src, dst, dstDev string, size int64) error { return ErrUnsupported }
