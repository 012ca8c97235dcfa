package runner

import (
	"bytes"
	"os"
	"strconv"
)

// groupRuns reports whether a process of group pgid is in a state other
// than zombie or dead, from /proc. A /proc that cannot be read answers
// true: the caller then goes by kill(-pgid, 0) alone, as it did before.
func groupRuns(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold anything, so the
		// fields are counted from the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || !bytes.Equal(f[2], want) {
			continue
		}
		if st := f[0]; len(st) == 1 && (st[0] == 'Z' || st[0] == 'X') {
			continue
		}
		return true
	}
	return false
}
