package activity

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Tail reads the audit log in dir from its oldest rotated file to the
// current one, calling emit for every record; with follow it then waits for
// new records (surviving rotation) until ctx is done. pollEvery is how often
// it looks for new lines (default 250 ms).
func Tail(ctx context.Context, dir string, follow bool, pollEvery time.Duration, emit func(Record) error) error {
	if pollEvery <= 0 {
		pollEvery = 250 * time.Millisecond
	}
	path := filepath.Join(dir, FileName)
	rotated, _ := filepath.Glob(path + ".*")
	for i := len(rotated); i >= 1; i-- {
		f, err := os.Open(fmt.Sprintf("%s.%d", path, i))
		if err != nil {
			continue
		}
		err = ReadFile(f, emit)
		f.Close()
		if err != nil {
			return err
		}
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && follow {
		f, err = waitForFile(ctx, path, pollEvery)
	}
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no audit log at %s yet: agentd writes it when it performs its first operation", path)
	}
	if err != nil {
		return err
	}
	var next *os.File // the new file after a rotation, once the old one is drained
	defer func() {
		f.Close()
		if next != nil {
			next.Close()
		}
	}()
	r := bufio.NewReaderSize(f, 64<<10)
	var partial []byte
	for {
		line, err := r.ReadBytes('\n')
		partial = append(partial, line...)
		if err == nil {
			var rec Record
			if json.Unmarshal(partial, &rec) == nil {
				if err := emit(rec); err != nil {
					return err
				}
			}
			partial = partial[:0]
			continue
		}
		if err != io.EOF {
			return err
		}
		if !follow {
			return nil
		}
		// At the end of a file that was rotated away and then drained once
		// more (lines may have landed between our EOF and the rotation):
		// continue with the new file.
		if next != nil {
			f.Close()
			f, next = next, nil
			r.Reset(f)
			partial = partial[:0]
			continue
		}
		if cur, serr := os.Stat(path); serr == nil {
			if old, ferr := f.Stat(); ferr == nil && !os.SameFile(cur, old) {
				if nf, oerr := os.Open(path); oerr == nil {
					next = nf
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pollEvery):
		}
	}
}

func waitForFile(ctx context.Context, path string, every time.Duration) (*os.File, error) {
	for {
		f, err := os.Open(path)
		if !errors.Is(err, os.ErrNotExist) {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(every):
		}
	}
}
