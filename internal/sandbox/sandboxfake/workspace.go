package sandboxfake

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/wstar"
)

// workspaceDir returns the host directory of a container's workspace,
// refusing a container that runs (as the contract says: the engine's copy
// would race its processes).
func (d *Driver) workspaceDir(id, op string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down(op + " " + id); err != nil {
		return "", err
	}
	c := d.lookup(id)
	if c == nil {
		return "", fmt.Errorf("%s %s: %w", op, id, sandbox.ErrNotFound)
	}
	if c.state == sandbox.StateRunning || c.state == sandbox.StatePaused {
		return "", fmt.Errorf("%s %s: the container runs", op, id)
	}
	v, ok := d.volumes[c.vol]
	if !ok {
		return "", fmt.Errorf("%s %s: volume %s: %w", op, id, c.vol, sandbox.ErrNotFound)
	}
	return v.dir, nil
}

// ExportWorkspace walks the workspace directory into a tar stream in the
// snapshot export format.
func (d *Driver) ExportWorkspace(_ context.Context, id string) (io.ReadCloser, error) {
	dir, err := d.workspaceDir(id, "export the workspace of")
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("export the workspace of %s: %w", id, err)
	}
	pr, pw := io.Pipe()
	go func() {
		defer root.Close()
		pw.CloseWithError(wstar.Export(root, pw))
	}()
	return pr, nil
}

// ImportWorkspace extracts a snapshot export stream into the workspace
// directory; as root, every entry becomes uid 1000's.
func (d *Driver) ImportWorkspace(_ context.Context, id string, r io.Reader) error {
	dir, err := d.workspaceDir(id, "import the workspace of")
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("import the workspace of %s: %w", id, err)
	}
	defer root.Close()
	if err := wstar.Extract(root, r, 1000, 1000); err != nil {
		return fmt.Errorf("import the workspace of %s: %w", id, err)
	}
	return nil
}
