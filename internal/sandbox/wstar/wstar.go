// Package wstar is the workspace tar of the sandbox drivers: the snapshot
// export format (sandbox.Driver's ExportWorkspace and ImportWorkspace) read
// from and written into a directory, and the check a stream gets before an
// engine extracts it. One implementation for the drivers that reach a
// workspace's directory (the in-memory fake, Kubernetes's hostPath
// volumes) and for those that hand the stream to a tar elsewhere (Docker's
// archive API, a Kubernetes helper Pod).
//
// The format: directories, regular files and symlinks with their modes
// (setuid, setgid and sticky bits included) and modification times, paths
// relative to the workspace, no owners, PAX headers. What extracts it
// refuses absolute paths, "..", NUL bytes and any other entry type, and a
// stream without the tar's end marker (tarcheck), so that a cut stream
// never passes for a smaller workspace.
//
// The directory is an os.Root: a symlink the sandbox left in its
// workspace cannot lead a read or write of the driver (often root) out of
// it.
package wstar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"github.com/devdepot-ai/agentd/internal/tarcheck"
)

// Export writes root's tree as a tar stream in the snapshot export format.
// Sockets, fifos and devices are left out: nothing an archive holds.
func Export(root *os.Root, w io.Writer) error {
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
			return nil
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

// next reads the next entry of a snapshot export stream and its checked
// relative path ("" for the root itself); io.EOF at the tar's end marker,
// an error when the stream ends without it or an entry is not a
// directory, regular file or symlink.
func next(tr *tar.Reader, tail *tarcheck.Reader) (*tar.Header, string, error) {
	hdr, err := tr.Next()
	if err == io.EOF {
		if !tail.Complete() {
			return nil, "", errors.New("the stream ends without the tar's end marker")
		}
		return nil, "", io.EOF
	}
	if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
		err = nil // RelPath decides
	}
	if err != nil {
		return nil, "", err
	}
	rel, err := tarcheck.RelPath(hdr.Name)
	if err != nil || rel == "" {
		return hdr, rel, err
	}
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
		return hdr, rel, nil
	default:
		return nil, "", fmt.Errorf("entry %q: type %q is not a directory, file or symlink", rel, hdr.Typeflag)
	}
}

// Extract writes a snapshot export stream into root, each entry with the
// stream's mode and time and, when this process runs as root, owned by
// uid and gid. Directories an entry needs and the stream lacks are made
// 0755. It fails on what next refuses; what it wrote before stays.
func Extract(root *os.Root, r io.Reader, uid, gid int) error {
	tail := tarcheck.NewReader(r)
	tr := tar.NewReader(tail)
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirs []dirTime
	chown := -1
	if os.Geteuid() == 0 {
		chown = uid
	}
	for {
		hdr, rel, err := next(tr, tail)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if rel == "" {
			continue
		}
		p := path.Clean(rel)
		if hdr.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirTime{p, hdr.ModTime})
			err = mkdirs(root, p, chown, gid)
		} else {
			err = mkdirs(root, path.Dir(p), chown, gid)
		}
		if err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
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
			if err := root.Symlink(hdr.Linkname, p); err != nil {
				return err
			}
		}
		if chown >= 0 {
			if err := root.Lchown(p, uid, gid); err != nil {
				return err
			}
		}
		if hdr.Typeflag != tar.TypeSymlink {
			if err := root.Chmod(p, fs.FileMode(hdr.Mode&0o777)|fileModeBits(hdr.Mode)); err != nil {
				return err
			}
			if err := root.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
				return err
			}
		} else if err := lchtimes(root, p, hdr.ModTime); err != nil {
			return err
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- { // children changed their parents' times
		if err := root.Chtimes(dirs[i].path, dirs[i].t, dirs[i].t); err != nil {
			return err
		}
	}
	return nil
}

// mkdirs makes dir and its missing parents in root, 0755 and (uid >= 0)
// uid and gid's: an entry may come before its directory's, or without one.
func mkdirs(root *os.Root, dir string, uid, gid int) error {
	if dir == "." {
		return nil
	}
	if fi, err := root.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err := mkdirs(root, path.Dir(dir), uid, gid); err != nil {
		return err
	}
	if err := root.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if uid >= 0 {
		return root.Lchown(dir, uid, gid)
	}
	return nil
}

// Own copies a snapshot export stream to w for a tar elsewhere to extract
// (an engine's archive API, GNU tar in a helper Pod): the same checks as
// Extract, names made clean and relative, every entry uid and gid's, and
// nothing but directories, regular files and symlinks. It fails on a
// stream that ends without the tar's end marker, without writing w's.
func Own(r io.Reader, w io.Writer, uid, gid int) error {
	tail := tarcheck.NewReader(r)
	tr, tw := tar.NewReader(tail), tar.NewWriter(w)
	for {
		hdr, rel, err := next(tr, tail)
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read the workspace stream: %w", err)
		}
		if rel == "" {
			continue
		}
		out := &tar.Header{Typeflag: hdr.Typeflag, Name: rel, Mode: hdr.Mode & 0o7777, ModTime: hdr.ModTime,
			Size: hdr.Size, Linkname: hdr.Linkname, Uid: uid, Gid: gid, Format: tar.FormatPAX}
		if hdr.Typeflag == tar.TypeDir {
			out.Name += "/"
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("read the workspace stream: %w", err)
			}
		}
	}
}

// Rewrite copies a tar of a workspace that another tar made (GNU tar
// run in the workspace's directory, e.g. in a Kubernetes helper Pod) to w
// in the snapshot export format: names clean and relative, the root
// itself and owners left out, and, as Export does, every entry but
// directories, regular files and symlinks (make that tar store hard links
// as files). It fails on a name that climbs out or is absolute and on a
// stream without the tar's end marker.
func Rewrite(r io.Reader, w io.Writer) error {
	tail := tarcheck.NewReader(r)
	tr, tw := tar.NewReader(tail), tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if !tail.Complete() {
				return errors.New("read the workspace's tar: it ends without the tar's end marker")
			}
			return tw.Close()
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // RelPath decides
		}
		if err != nil {
			return fmt.Errorf("read the workspace's tar: %w", err)
		}
		rel, err := tarcheck.RelPath(hdr.Name)
		if err != nil {
			return fmt.Errorf("read the workspace's tar: %w", err)
		}
		if rel == "" {
			continue
		}
		out := &tar.Header{Typeflag: hdr.Typeflag, Name: rel, Mode: hdr.Mode & 0o7777, ModTime: hdr.ModTime,
			Linkname: hdr.Linkname, Format: tar.FormatPAX}
		switch hdr.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
		case tar.TypeReg:
			out.Size = hdr.Size
		case tar.TypeSymlink:
		default:
			continue
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("read the workspace's tar: %w", err)
			}
		}
	}
}
