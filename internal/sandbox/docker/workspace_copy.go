package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/moby/moby/client"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/sandbox/wstar"
)

// ExportWorkspace reads a container's /workspace through the engine's
// archive API (docker cp), which mounts the volume of a container that
// does not run, and rewrites the engine's tar into the snapshot export
// format: the leading "workspace/" cut from every path (and from hard
// links' targets), the root itself left out, owners dropped.
func (d *Driver) ExportWorkspace(ctx context.Context, id string) (io.ReadCloser, error) {
	res, err := d.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: sandbox.WorkspaceDir})
	if err != nil {
		return nil, d.fail("export the workspace of "+id, err)
	}
	pr, pw := io.Pipe()
	go func() {
		err := rebaseExport(res.Content, pw)
		res.Content.Close()
		pw.CloseWithError(err) // nil: EOF
	}()
	return pr, nil
}

// rebaseExport copies the engine's tar of /workspace to w with paths
// relative to the workspace.
func rebaseExport(r io.Reader, w io.Writer) error {
	root := strings.TrimPrefix(sandbox.WorkspaceDir, "/") + "/"
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read the workspace's archive: %w", err)
		}
		name, ok := strings.CutPrefix(hdr.Name, root)
		if !ok || name == "" {
			continue // the root: the volume's own, made by Create
		}
		out := &tar.Header{Typeflag: hdr.Typeflag, Name: name, Mode: hdr.Mode & 0o7777, ModTime: hdr.ModTime,
			Size: hdr.Size, Linkname: hdr.Linkname, Devmajor: hdr.Devmajor, Devminor: hdr.Devminor, Format: tar.FormatPAX}
		if hdr.Typeflag == tar.TypeLink {
			out.Linkname = strings.TrimPrefix(hdr.Linkname, root)
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("read the workspace's archive: %w", err)
			}
		}
	}
}

// ImportWorkspace extracts a snapshot export stream into a created
// container's /workspace through the engine's archive API. The engine
// extracts with the owners the tar names (no CopyUIDGID), so every entry
// is rewritten to be the sandbox user's. The destination is the volume:
// the read-only root does not refuse it.
func (d *Driver) ImportWorkspace(ctx context.Context, id string, r io.Reader) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(wstar.Own(r, pw, uid, gid)) }()
	_, err := d.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: sandbox.WorkspaceDir, Content: pr})
	pr.CloseWithError(errors.New("import ended")) // unblocks Own when the engine stopped reading
	if err != nil {
		return d.fail("import the workspace of "+id, err)
	}
	return nil
}
