package kube

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/loopfs"
)

// CopyRunningWorkspace copies the workspace of src into that of every dst
// (each created, never started) at one instant, while src keeps running:
// a bounded hostPath workspace (bounded.go) is frozen (FIFREEZE) for the
// copies, so every one is the same clean file system and the sandbox's
// processes only wait in their writes meanwhile; they keep their state.
// Kubernetes has no pause, so this is what the hub's fork of a running
// sandbox does instead. An unbounded hostPath directory cannot be frozen:
// a src that runs with one is refused (sandbox.ErrNotSupported), as are
// provisioned volumes.
func (d *Driver) CopyRunningWorkspace(ctx context.Context, src string, dsts []string) error {
	return d.copyWorkspaces(ctx, src, dsts, true)
}

// copyWorkspaces copies src's workspace into each of dsts'. A bounded
// source is frozen for all of them and copied as its image into a bounded
// destination of its size (sparse, within the kernel), else file by file
// from the frozen mount; an unbounded one is copied file by file, and
// refused when it runs and live is set.
func (d *Driver) copyWorkspaces(ctx context.Context, src string, dsts []string, live bool) (err error) {
	in, err := d.Inspect(ctx, src)
	if err != nil {
		return err
	}
	if d.hostDir == "" {
		if live && notRunning(in) != nil {
			return fmt.Errorf("copy the workspace of %s: %w: it runs, and its workspace is a claim of StorageClass %s, which the driver cannot freeze (Kubernetes has no pause): stop the sandbox first", src, sandbox.ErrNotSupported, d.class)
		}
		for _, dst := range dsts {
			if err := d.copyHelper(ctx, src, dst); err != nil {
				return err
			}
		}
		return nil
	}
	sClaim := claimName(src)
	if !d.bounded(sClaim) {
		if live && notRunning(in) != nil {
			return fmt.Errorf("copy the workspace of %s: %w: it runs, and its workspace is an unbounded hostPath directory, which cannot be frozen (Kubernetes has no pause): stop the sandbox first, or bound workspaces (agenthub serve --sandbox-workspace-max)", src, sandbox.ErrNotSupported)
		}
		for _, dst := range dsts {
			if err := d.copyTar(ctx, src, dst); err != nil {
				return err
			}
		}
		return nil
	}
	if err := d.mountBounded(sClaim); err != nil {
		return fmt.Errorf("copy the workspace of %s: %w", src, err)
	}
	thaw, err := loopfs.Freeze(d.hostDirOf(sClaim))
	if err != nil {
		return fmt.Errorf("copy the workspace of %s: %w", src, err)
	}
	defer func() {
		if terr := thaw(); terr != nil && err == nil {
			err = fmt.Errorf("copy the workspace of %s: %w", src, terr)
		}
	}()
	for _, dst := range dsts {
		ok, err := d.copyImage(ctx, src, dst)
		if err != nil {
			return err
		}
		if ok {
			d.log.Debug("workspace image copied", zap.String("from", src), zap.String("to", dst))
			continue
		}
		if err := d.copyTar(ctx, src, dst); err != nil {
			return err
		}
	}
	return nil
}

// copyImage copies the (frozen or unmounted) bounded workspace of src as
// its image into dst's, when dst's is bounded and of the same size: dst's
// is unmounted for the copy and mounted again after it. ok false (and
// nil): not such a pair, nothing changed.
func (d *Driver) copyImage(ctx context.Context, src, dst string) (ok bool, err error) {
	sClaim, dClaim := claimName(src), claimName(dst)
	if !d.bounded(dClaim) {
		return false, nil
	}
	sImg, _ := d.imageFiles(sClaim)
	dImg, dDev := d.imageFiles(dClaim)
	sFi, err1 := os.Stat(sImg)
	dFi, err2 := os.Stat(dImg)
	if err1 != nil || err2 != nil || sFi.Size() != dFi.Size() {
		return false, nil
	}
	in, err := d.Inspect(ctx, dst)
	if err != nil {
		return true, err
	}
	if err := neverRan(in); err != nil {
		return true, fmt.Errorf("copy a workspace into %s: %w", dst, err)
	}
	if err := d.unmountBounded(dClaim); err != nil {
		return true, fmt.Errorf("copy a workspace into %s: %w", dst, err)
	}
	defer func() {
		if merr := d.mountBounded(dClaim); merr != nil && err == nil {
			err = fmt.Errorf("copy a workspace into %s: %w", dst, merr)
		}
	}()
	loop := loopfs.LoopOf(dImg, dDev)
	if loop == "" {
		if loop, err = loopfs.Attach(d.loopControl, dImg, dDev); err != nil {
			return true, fmt.Errorf("copy a workspace into %s: %w", dst, err)
		}
	}
	if err := loopfs.CopyImage(ctx, sImg, dImg, loop, sFi.Size()); err != nil {
		return true, fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	return true, nil
}
