package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// Limits on requests. They keep one request from taking the daemon's memory
// or flooding the agent's context; past them a request fails with a clear
// error rather than being silently cut.
const (
	// MaxPathLen is the longest path accepted, in bytes (Linux PATH_MAX).
	MaxPathLen = 4096
	// ChunkSize is the largest chunk Read hands out.
	ChunkSize = wire.ChunkSize
	// MaxEditSize is the largest file Edit works on.
	MaxEditSize = 64 << 20

	maxNameLen  = 255     // NAME_MAX: one component of a path
	binarySniff = 8 << 10 // a NUL byte in this many leading bytes marks a file binary
)

// Options configures an FS. Zero fields get defaults in New.
type Options struct {
	// Workspace is the directory relative paths resolve against.
	// Default: the user's home directory.
	Workspace string
	// Home is what a leading "~" in a path stands for. Default: the user's
	// home directory, else Workspace.
	Home string
	// SearchWorkers is how many files Search reads in parallel.
	// Default: GOMAXPROCS, at least 2.
	SearchWorkers int
}

// FS performs file operations on behalf of an agent. It holds no open
// files between calls and is safe for concurrent use.
type FS struct {
	workspace string
	home      string
	user      string // who the daemon runs as, for permission messages
	workers   int

	// searchWholeFile is the largest file Search reads into memory at once;
	// larger files are scanned line by line. A field so tests can lower it.
	searchWholeFile int64

	background *sync.WaitGroup // work left running by a returned call (see Wait)
}

// Wait waits for the work calls left running after they returned: freeing
// the blocks of large files that writes replaced.
func (f *FS) Wait() { f.background.Wait() }

// New returns an FS for opts, defaults filled in. The workspace must be an
// existing directory.
func New(opts Options) (*FS, error) {
	home := opts.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	ws := opts.Workspace
	if ws == "" {
		if home == "" {
			return nil, errors.New("files: no workspace given and no home directory")
		}
		ws = home
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return nil, fmt.Errorf("files: workspace: %w", err)
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("files: workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("files: workspace %s is not a directory", ws)
	}
	if home == "" {
		home = ws
	}
	home, err = filepath.Abs(home)
	if err != nil {
		return nil, fmt.Errorf("files: home: %w", err)
	}
	f := &FS{
		workspace:       ws,
		home:            home,
		workers:         opts.SearchWorkers,
		searchWholeFile: 32 << 20,
		background:      new(sync.WaitGroup),
	}
	if f.workers <= 0 {
		f.workers = max(runtime.GOMAXPROCS(0), 2)
	}
	f.user = strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		f.user = u.Username
	}
	return f, nil
}

// Workspace returns the absolute workspace directory.
func (f *FS) Workspace() string { return f.workspace }

// Resolve turns a path from a request into an absolute, clean path: a
// relative path is taken relative to the workspace, and "~" or a leading
// "~/" stands for the home directory. It rejects empty paths, NUL bytes,
// invalid UTF-8 and over-long paths or names. Symlinks are not resolved.
func (f *FS) Resolve(p string) (string, error) {
	if p == "" {
		return "", errs.New(errs.Invalid, "path is empty: give an absolute path or one relative to the workspace %s", f.workspace)
	}
	if i := strings.IndexByte(p, 0); i >= 0 {
		return "", errs.New(errs.Invalid, "path contains a NUL byte at offset %d; paths cannot contain NUL", i)
	}
	if !utf8.ValidString(p) {
		return "", errs.New(errs.Invalid, "path %q is not valid UTF-8", p)
	}
	if len(p) > MaxPathLen {
		return "", errs.New(errs.Invalid, "path is %d bytes long; the limit is %d", len(p), MaxPathLen)
	}
	switch {
	case p == "~":
		p = f.home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(f.home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(f.workspace, p)
	default:
		p = filepath.Clean(p)
	}
	if len(p) > MaxPathLen {
		return "", errs.New(errs.Invalid, "path %s is %d bytes long once resolved; the limit is %d", shorten(p, 200), len(p), MaxPathLen)
	}
	for _, name := range strings.Split(p, string(filepath.Separator)) {
		if len(name) > maxNameLen {
			return "", errs.New(errs.Invalid, "a name in path %s is %d bytes long; the limit is %d", shorten(p, 200), len(name), maxNameLen)
		}
	}
	return p, nil
}

// Type is the kind of a directory entry.
type Type int

// The kinds of entry.
const (
	TypeOther   Type = iota // socket, device, named pipe, …
	TypeFile                // regular file
	TypeDir                 // directory
	TypeSymlink             // symbolic link, not followed
)

// String returns "file", "dir", "symlink" or "other".
func (t Type) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	}
	return "other"
}

func typeOf(m fs.FileMode) Type {
	switch {
	case m.IsRegular():
		return TypeFile
	case m.IsDir():
		return TypeDir
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	}
	return TypeOther
}

// Entry describes one path. A symlink is described itself, not followed.
type Entry struct {
	Path    string      // absolute, clean
	Name    string      // base name
	Type    Type        // what kind of entry
	Size    int64       // bytes; for a symlink the length of its target
	Mode    fs.FileMode // permission bits and fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky
	ModTime time.Time   // last modification
	Target  string      // for a symlink, where it points, as stored in the link
	UID     uint32      // numeric owner
	GID     uint32      // numeric group
}

// modeBits are the parts of fs.FileMode an Entry reports and Write accepts.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

func entryOf(path string, fi fs.FileInfo) Entry {
	e := Entry{
		Path:    path,
		Name:    filepath.Base(path),
		Type:    typeOf(fi.Mode()),
		Size:    fi.Size(),
		Mode:    fi.Mode() & modeBits,
		ModTime: fi.ModTime(),
	}
	e.UID, e.GID, _ = ownerOf(fi)
	if e.Type == TypeSymlink {
		e.Target, _ = os.Readlink(path)
	}
	return e
}

// pathError turns an error of the os package about path into a classified
// error whose message tells the agent what happened.
func (f *FS) pathError(path string, err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errs.New(errs.NotFound, "%s does not exist", path)
	case errors.Is(err, fs.ErrPermission):
		return errs.New(errs.Permission, "permission denied: %s (agentd runs as user %s)", path, f.user)
	case errors.Is(err, syscall.EROFS):
		return errs.New(errs.Permission, "%s is on a read-only file system", path)
	case errors.Is(err, syscall.ENOTDIR):
		return errs.New(errs.Precondition, "%s: a component of the path is a file, not a directory", path)
	case errors.Is(err, syscall.EISDIR):
		return errs.New(errs.Precondition, "%s is a directory", path)
	case errors.Is(err, syscall.ELOOP):
		return errs.New(errs.Precondition, "%s: too many levels of symbolic links", path)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return errs.New(errs.Invalid, "%s: file name too long", path)
	case errors.Is(err, syscall.ENOSPC):
		return errs.Wrap(errs.Exhausted, err, "no space left on the device holding %s", path)
	case errors.Is(err, syscall.EDQUOT):
		return errs.Wrap(errs.Exhausted, err, "disk quota exceeded on the device holding %s", path)
	case errors.Is(err, syscall.EFBIG):
		return errs.Wrap(errs.Exhausted, err, "file too large for the file system holding %s", path)
	}
	return errs.Wrap(errs.KindOf(err), err, "%s", path)
}

// lstat describes path without following a final symlink.
func (f *FS) lstat(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, f.pathError(path, err)
	}
	return fi, nil
}

// shorten cuts s to at most n bytes (on a rune boundary) with an ellipsis.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// plural returns "1 line" or "3 lines": n and the word for its number.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
