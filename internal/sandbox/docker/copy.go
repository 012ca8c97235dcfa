package docker

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// copySuffix names the short-lived container that copies one sandbox's
// workspace into another's (CopyWorkspace): DST-copy.
const copySuffix = "-copy"

// copyScript empties the destination volume (the engine may have copied
// the image's /workspace into it) and copies the source's tree into it:
// cp -a keeps modes, owners, symlinks (as links, never followed) and
// modification times, the root directory's own included.
const copyScript = `set -e; rm -rf /dst/* /dst/.[!.]* /dst/..?*; cp -a /src/. /dst/`

// copyPids bounds the helper's processes (sh, rm, cp).
const copyPids = 64

// CopyWorkspace copies the workspace of container src into that of dst,
// replacing what dst's held. Two bounded workspaces of one size are
// copied as their file system images (copy_image_linux.go). When the hub
// is on the engine's host, as root, and both are plain local volumes, cp
// -a runs here between their directories (copy_host.go). Either way no
// container is created, started and removed. Otherwise it copies through
// a helper container that mounts both
// volumes (src read-only) and runs cp -a from dst's image as root with
// only the capabilities that keep owners and modes: no network, a
// read-only root, dst's runtime (a gVisor sandbox's workspace is copied
// under gVisor). The engine's archive API (CopyFromContainer into
// CopyToContainer) would do without the helper, but streams every byte
// through the engine twice as tar.
func (d *Driver) CopyWorkspace(ctx context.Context, src, dst string) (err error) {
	s, err := d.cli.ContainerInspect(ctx, src, client.ContainerInspectOptions{})
	if err != nil {
		return d.fail("inspect container "+src, err)
	}
	t, err := d.cli.ContainerInspect(ctx, dst, client.ContainerInspectOptions{})
	if err != nil {
		return d.fail("inspect container "+dst, err)
	}
	srcVol, dstVol := workspaceVolume(s.Container.Mounts), workspaceVolume(t.Container.Mounts)
	if srcVol == "" || dstVol == "" || srcVol == dstVol {
		return fmt.Errorf("copy workspace %s → %s: %w: both need a workspace volume of their own", src, dst, sandbox.ErrNotFound)
	}
	if st := t.Container.State; st != nil && (st.Running || st.Paused) {
		return fmt.Errorf("copy workspace %s → %s: the destination runs; it must not have started", src, dst)
	}
	if ok, err := d.copyImage(ctx, srcVol, dstVol); ok || err != nil {
		if err != nil {
			return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
		}
		d.imageCopies.Add(1)
		d.log.Debug("workspace image copied", zap.String("from", src), zap.String("to", dst))
		return nil
	}
	if from, to, ok := d.hostDirs(ctx, t.Container.ID, srcVol, dstVol); ok {
		if err := copyHost(ctx, from, to); err != nil {
			return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
		}
		d.hostCopies.Add(1)
		d.log.Debug("workspace copied on the host", zap.String("from", src), zap.String("to", dst))
		return nil
	}
	name := strings.TrimPrefix(t.Container.Name, "/") + copySuffix
	labels := map[string]string{}
	if t.Container.Config != nil {
		for k, v := range t.Container.Config.Labels {
			if strings.HasPrefix(k, hubLabelPrefix) {
				labels[k] = v
			}
		}
	}
	// Not the sandbox's own id: the hub's reconcile must never take the
	// helper for the sandbox's container (an orphan of a crash is
	// removed as one of a sandbox that has no row).
	labels[sandbox.LabelID] = labels[sandbox.LabelID] + copySuffix
	image := t.Container.Image // the engine's image id: what dst runs
	pids := int64(copyPids)
	res, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:           image,
			User:            "0:0",
			Entrypoint:      []string{"/bin/sh", "-c", copyScript},
			Labels:          labels,
			NetworkDisabled: true,
			Healthcheck:     &container.HealthConfig{Test: []string{"NONE"}},
		},
		HostConfig: &container.HostConfig{
			Runtime:        t.Container.HostConfig.Runtime,
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			CapAdd:         []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "MKNOD"},
			SecurityOpt:    []string{"no-new-privileges"},
			Resources:      container.Resources{PidsLimit: &pids},
			Mounts: []mount.Mount{
				{Type: mount.TypeVolume, Source: srcVol, Target: "/src", ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
				{Type: mount.TypeVolume, Source: dstVol, Target: "/dst", VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			},
			LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": logMaxSize, "max-file": logMaxFiles}},
		},
	})
	if err != nil {
		return d.fail("create workspace copy container "+name, err)
	}
	d.helpers.Add(1)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if rerr := d.removeContainer(cctx, res.ID); rerr != nil && err == nil {
			err = rerr
		}
	}()
	wait := d.cli.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := d.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return d.fail("start workspace copy container "+name, err)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
		if r.Error != nil && r.Error.Message != "" {
			return fmt.Errorf("copy workspace %s → %s: %s", src, dst, r.Error.Message)
		}
	case err := <-wait.Error:
		return d.fail("wait for workspace copy container "+name, err)
	}
	if code != 0 {
		return fmt.Errorf("copy workspace %s → %s: the copy exited %d: %s", src, dst, code, d.tail(ctx, res.ID))
	}
	d.log.Debug("workspace copied", zap.String("from", src), zap.String("to", dst))
	return nil
}

// tail is the end of a container's output, for an error.
func (d *Driver) tail(ctx context.Context, id string) string {
	logs, err := d.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "5"})
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	defer logs.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, logs)
	return strings.TrimSpace(out.String())
}
