package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// copyMarkerPrefix names the file hostDirs writes into the destination's
// host directory to prove that the engine sees it in the container.
const copyMarkerPrefix = ".agentd-copy-probe-"

// hostDirs returns the host directories of two workspace volumes when the
// copy between them can run here, without a helper container: the engine
// is on this host (a unix socket), the hub is root (the engine's volumes
// are root's), both are plain local volumes (a bounded workspace's is
// mounted only while its container runs), and a marker written into dst's
// directory on this host is what the engine shows at dst's /workspace (a
// hub in another mount namespace than the engine's, Docker Desktop's VM,
// a socket mounted into a container, finds no such file). ok false: the
// helper copies.
func (d *Driver) hostDirs(ctx context.Context, dst, srcVol, dstVol string) (src, dstDir string, ok bool) {
	if d.copyInHelper || !strings.HasPrefix(d.host, "unix://") || os.Geteuid() != 0 {
		return "", "", false
	}
	dir := func(vol string) string {
		v, err := d.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
		if err != nil || v.Volume.Driver != "local" || len(v.Volume.Options) > 0 || !filepath.IsAbs(v.Volume.Mountpoint) {
			return ""
		}
		if fi, err := os.Lstat(v.Volume.Mountpoint); err != nil || !fi.IsDir() {
			return ""
		}
		return v.Volume.Mountpoint
	}
	if src, dstDir = dir(srcVol), dir(dstVol); src == "" || dstDir == "" {
		return "", "", false
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	marker := copyMarkerPrefix + hex.EncodeToString(b)
	p := filepath.Join(dstDir, marker)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		return "", "", false
	}
	defer os.Remove(p)
	if _, err := d.cli.ContainerStatPath(ctx, dst, client.ContainerStatPathOptions{Path: path.Join(sandbox.WorkspaceDir, marker)}); err != nil {
		d.log.Debug("a workspace volume's directory here is not the engine's: copying in a helper container", zap.String("dir", dstDir), zap.Error(err))
		return "", "", false
	}
	return src, dstDir, true
}

// copyHost does copyScript on this host: it empties dst and copies src's
// tree into it with cp -a, which keeps modes, owners, symlinks (as links,
// never followed), hard links and modification times, dst's own included.
// The source is a sandbox's workspace, so its names and links are
// hostile: cp -a never follows a link inside it, and the destination is a
// volume nothing has run in yet.
func copyHost(ctx context.Context, src, dst string) error {
	entries, err := os.ReadDir(dst)
	if err != nil {
		return fmt.Errorf("empty the destination: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("empty the destination: %w", err)
		}
	}
	out, err := exec.CommandContext(ctx, "cp", "-a", "--", src+"/.", dst+"/").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 512 {
			msg = msg[len(msg)-512:]
		}
		return fmt.Errorf("cp -a: %w: %s", err, msg)
	}
	return nil
}
