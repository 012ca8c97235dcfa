package files

import "golang.org/x/sys/unix"

func mount(source, target, fstype, data string) error {
	return unix.Mount(source, target, fstype, 0, data)
}

func unmount(target string) error { return unix.Unmount(target, 0) }
