package sandboxfake

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// CopyWorkspace replaces dst's workspace directory with a copy of src's,
// by the host's cp -a (modes, symlinks, times; owners when the test runs
// as root).
func (d *Driver) CopyWorkspace(ctx context.Context, src, dst string) error {
	d.mu.Lock()
	if err := d.down("copy workspace " + src); err != nil {
		d.mu.Unlock()
		return err
	}
	s, t := d.lookup(src), d.lookup(dst)
	var from, to string
	switch {
	case s == nil:
		d.mu.Unlock()
		return fmt.Errorf("copy workspace: container %s: %w", src, sandbox.ErrNotFound)
	case t == nil:
		d.mu.Unlock()
		return fmt.Errorf("copy workspace: container %s: %w", dst, sandbox.ErrNotFound)
	case t.state == sandbox.StateRunning || t.state == sandbox.StatePaused:
		d.mu.Unlock()
		return fmt.Errorf("copy workspace %s → %s: the destination runs; it must not have started", src, dst)
	}
	if v := d.volumes[s.vol]; v != nil {
		from = v.dir
	}
	if v := d.volumes[t.vol]; v != nil {
		to = v.dir
	}
	d.mu.Unlock()
	if from == "" || to == "" {
		return fmt.Errorf("copy workspace %s → %s: %w: a workspace volume is gone", src, dst, sandbox.ErrNotFound)
	}
	ents, err := os.ReadDir(to)
	if err != nil {
		return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(to, e.Name())); err != nil {
			return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
		}
	}
	out, err := exec.CommandContext(ctx, "cp", "-a", from+"/.", to+"/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("copy workspace %s → %s: cp: %w: %s", src, dst, err, strings.TrimSpace(string(out)))
	}
	return nil
}
