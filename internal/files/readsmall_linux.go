package files

import (
	"errors"

	"golang.org/x/sys/unix"
)

var errNotRegular = errors.New("not a regular file")

// readSmall reads the regular file at path into buf, reusing its capacity,
// when the file holds at most limit bytes; for a larger file it returns
// big and no data. It uses the system calls directly: Search reads many
// small files, and an os.File costs several more calls per file (it tries
// to register the file with the poller).
func readSmall(path string, buf []byte, limit int64) (data []byte, big bool, err error) {
	var fd int
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false, errNotRegular
	}
	if st.Size > limit {
		return nil, true, nil
	}
	size := int(st.Size)
	if cap(buf) < size+1 {
		buf = make([]byte, 0, size+size/4+4096)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, true, nil // it grew while we read it
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf, false, err
		}
		if n == 0 {
			return buf, false, nil
		}
		buf = buf[:len(buf)+n]
		if size > 0 && len(buf) == size {
			// All the file had when we looked: skip the call that would
			// return end of file. (Size 0 may be a /proc file: read on.)
			return buf, false, nil
		}
	}
}
