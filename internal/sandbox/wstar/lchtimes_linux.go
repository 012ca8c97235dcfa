package wstar

import (
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// lchtimes sets the access and modification times of name in root to t
// without following it, when it is a symlink (os.Root's Chtimes follows).
func lchtimes(root *os.Root, name string, t time.Time) error {
	dir, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer dir.Close()
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.UtimesNanoAt(int(dir.Fd()), path.Base(name), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lchtimes", Path: name, Err: err}
	}
	return nil
}
