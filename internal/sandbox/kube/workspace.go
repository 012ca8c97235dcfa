package kube

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/tarcheck"
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
	if d.hostDir == "" {
		return nil, fmt.Errorf("%s %s: %w: the driver reads and writes workspaces only on hostPath volumes (its host path dir)", op, id, sandbox.ErrNotSupported)
	}
	if err := ok(in); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, id, err)
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
// run, in the snapshot export format.
func (d *Driver) ExportWorkspace(ctx context.Context, id string) (io.ReadCloser, error) {
	root, err := d.workspaceDir(ctx, "export the workspace of", id, notRunning)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer root.Close()
		pw.CloseWithError(exportDir(root, pw))
	}()
	return pr, nil
}

// ImportWorkspace extracts a snapshot export stream into the workspace of
// a created sandbox, every entry uid 1000's.
func (d *Driver) ImportWorkspace(ctx context.Context, id string, r io.Reader) error {
	root, err := d.workspaceDir(ctx, "import the workspace of", id, neverRan)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := importDir(root, r); err != nil {
		return fmt.Errorf("import the workspace of %s: %w", id, err)
	}
	return nil
}

// CopyWorkspace replaces the workspace of dst, created and not started,
// with a copy of src's, by exporting one into the other.
func (d *Driver) CopyWorkspace(ctx context.Context, src, dst string) error {
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
	go func() { pw.CloseWithError(exportDir(from, pw)) }()
	err = importDir(to, pr)
	pr.CloseWithError(errors.New("copy ended"))
	if err != nil {
		return fmt.Errorf("copy workspace %s → %s: %w", src, dst, err)
	}
	return nil
}

// exportDir writes root's tree as a tar stream: directories, regular files
// and symlinks with their modes and times, no owners.
func exportDir(root *os.Root, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := fs.WalkDir(root.FS(), ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: p, Mode: int64(fi.Mode().Perm()) | modeBits(fi.Mode()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = root.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		default:
			return nil // sockets, fifos, devices: nothing an archive holds
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := root.OpenFile(p, os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, hdr.Size)
		return err
	})
	if err != nil {
		return fmt.Errorf("export workspace: %w", err)
	}
	return tw.Close()
}

// modeBits are the setuid, setgid and sticky bits of m as tar has them.
func modeBits(m fs.FileMode) int64 {
	var b int64
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// fileModeBits are tar's setuid, setgid and sticky bits as an fs.FileMode.
func fileModeBits(m int64) fs.FileMode {
	var b fs.FileMode
	if m&0o4000 != 0 {
		b |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		b |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		b |= fs.ModeSticky
	}
	return b
}

// importDir extracts a tar stream into root, every entry uid and gid
// 1000's (when the driver runs as root) with the stream's mode and time.
// A stream without the tar's end marker fails it.
func importDir(root *os.Root, r io.Reader) error {
	tail := tarcheck.NewReader(r)
	tr := tar.NewReader(tail)
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirs []dirTime
	asRoot := os.Geteuid() == 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if !tail.Complete() {
				return errors.New("the stream ends without the tar's end marker")
			}
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // RelPath decides
		}
		if err != nil {
			return err
		}
		rel, err := tarcheck.RelPath(hdr.Name)
		if err != nil {
			return err
		}
		if rel == "" {
			continue
		}
		p := path.Clean(rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := mkdirs(root, p, asRoot); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{p, hdr.ModTime})
		case tar.TypeReg:
			if err := mkdirs(root, path.Dir(p), asRoot); err != nil {
				return err
			}
			f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.CopyN(f, tr, hdr.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := mkdirs(root, path.Dir(p), asRoot); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %q is not a directory, file or symlink", rel, hdr.Typeflag)
		}
		if asRoot {
			if err := root.Lchown(p, uid, gid); err != nil {
				return err
			}
		}
		if hdr.Typeflag == tar.TypeSymlink {
			if err := lchtimes(root, p, hdr.ModTime); err != nil {
				return err
			}
		} else {
			if err := root.Chmod(p, fs.FileMode(hdr.Mode&0o777)|fileModeBits(hdr.Mode)); err != nil {
				return err
			}
			if err := root.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
				return err
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- { // children changed their parents' times
		if err := root.Chtimes(dirs[i].path, dirs[i].t, dirs[i].t); err != nil {
			return err
		}
	}
	return nil
}

// mkdirs makes dir and its missing parents in root, 0755 and (as root)
// the sandbox user's: an entry may come before its directory's, or
// without one.
func mkdirs(root *os.Root, dir string, chown bool) error {
	if dir == "." {
		return nil
	}
	if fi, err := root.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err := mkdirs(root, path.Dir(dir), chown); err != nil {
		return err
	}
	if err := root.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if chown {
		return root.Lchown(dir, uid, gid)
	}
	return nil
}
