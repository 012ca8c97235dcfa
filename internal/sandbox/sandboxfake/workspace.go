package sandboxfake

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/tarcheck"
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
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(exportDir(dir, pw)) }()
	return pr, nil
}

func exportDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		hdr.Mode |= int64(modeBits(fi.Mode()))
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		default:
			return nil // what an archive cannot hold
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
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
func modeBits(m fs.FileMode) uint32 {
	var b uint32
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

// ImportWorkspace extracts a snapshot export stream into the workspace
// directory; as root, every entry becomes uid 1000's.
func (d *Driver) ImportWorkspace(_ context.Context, id string, r io.Reader) error {
	dir, err := d.workspaceDir(id, "import the workspace of")
	if err != nil {
		return err
	}
	if err := importDir(dir, r); err != nil {
		return fmt.Errorf("import the workspace of %s: %w", id, err)
	}
	return nil
}

func importDir(dir string, r io.Reader) error {
	tail := tarcheck.NewReader(r)
	tr := tar.NewReader(tail)
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirs []dirTime
	root := os.Geteuid() == 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if !tail.Complete() {
				return errors.New("the stream ends without the tar's end marker")
			}
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil
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
		p := filepath.Join(dir, filepath.FromSlash(rel))
		mode := fs.FileMode(hdr.Mode & 0o777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{p, hdr.ModTime})
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
			if err := os.Symlink(hdr.Linkname, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %q is not a directory, file or symlink", rel, hdr.Typeflag)
		}
		if root {
			if err := os.Lchown(p, 1000, 1000); err != nil {
				return err
			}
		}
		if hdr.Typeflag != tar.TypeSymlink {
			if err := os.Chmod(p, mode|fileModeBits(hdr.Mode)); err != nil {
				return err
			}
			if err := os.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
				return err
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- { // children first changed their parents' times
		if err := os.Chtimes(dirs[i].path, dirs[i].t, dirs[i].t); err != nil {
			return err
		}
	}
	return nil
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
