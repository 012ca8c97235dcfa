package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/wstar"
)

// workspaceDir is the node directory of sandbox id's workspace, after
// checking that the sandbox is in a state op allows. The directory is
// opened as an os.Root: a symlink the sandbox left there cannot lead a
// read or write of the driver (root) out of it.
func (d *Driver) workspaceDir(ctx context.Context, op, id string, ok func(sandbox.Info) error) (*os.Root, error) {
	in, err := d.Inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := ok(in); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, id, err)
	}
	if d.bounded(claimName(id)) {
		if err := d.mountBounded(claimName(id)); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op, id, err)
		}
	}
	root, err := os.OpenRoot(d.hostDirOf(claimName(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s %s: its workspace: %w", op, id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, id, err)
	}
	return root, nil
}

func notRunning(in sandbox.Info) error {
	if in.State == sandbox.StateCreated || in.State == sandbox.StateExited {
		return nil
	}
	return fmt.Errorf("it runs (%s)", in.State)
}

func neverRan(in sandbox.Info) error {
	if in.State == sandbox.StateCreated {
		return nil
	}
	return fmt.Errorf("it has run (%s); only a created sandbox's workspace is written", in.State)
}

// ExportWorkspace tars the workspace directory of a sandbox that does not
// run, in the snapshot export format; on a provisioned volume, through a
// helper Pod (helperpod.go).
func (d *Driver) ExportWorkspace(ctx context.Context, id string) (io.ReadCloser, error) {
	if d.hostDir == "" {
		return d.exportHelper(ctx, id)
	}
	root, err := d.workspaceDir(ctx, "export the workspace of", id, notRunning)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer root.Close()
		pw.CloseWithError(wstar.Export(root, pw))
	}()
	return pr, nil
}

// ImportWorkspace extracts a snapshot export stream into the workspace of
// a created sandbox, every entry uid 1000's; on a provisioned volume,
// through a helper Pod.
func (d *Driver) ImportWorkspace(ctx context.Context, id string, r io.Reader) error {
	if d.hostDir == "" {
		return d.importHelper(ctx, id, r)
	}
	root, err := d.workspaceDir(ctx, "import the workspace of", id, neverRan)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := wstar.Extract(root, r, uid, gid); err != nil {
		return fmt.Errorf("import the workspace of %s: %w", id, err)
	}
	return nil
}

// CopyWorkspace replaces the workspace of dst, created and not started,
// with a copy of src's (copy.go: a bounded source frozen meanwhile).
func (d *Driver) CopyWorkspace(ctx context.Context, src, dst string) error {
	return d.copyWorkspaces(ctx, src, []string{dst}, false)
}

// copyTar replaces the workspace of dst, created and not started, with a
// copy of src's, by exporting one into the other.
func (d *Driver) copyTar(ctx context.Context, src, dst string) error {
	from, err := d.workspaceDir(ctx, "copy the workspace of", src, func(sandbox.Info) error { return nil })
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := d.workspaceDir(ctx, "copy a workspace into", dst, neverRan)
	if err != nil {
		return err
	}
	defer to.Close()
	ents, err := fs.ReadDir(to.FS(), ".")
	if err != nil {
		return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	for _, e := range ents {
		if err := to.RemoveAll(e.Name()); err != nil {
			return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
		}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(wstar.Export(from, pw)) }()
	err = wstar.Extract(to, pr, uid, gid)
	pr.CloseWithError(errors.New("copy ended"))
	if err != nil {
		return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	return nil
}
