//go:build !linux

package files

import "errors"

func mount(source, target, fstype, data string) error { return errors.New("mount: Linux only") }

func unmount(target string) error { return nil }
