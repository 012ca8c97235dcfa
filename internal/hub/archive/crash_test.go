package archive

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	crashEnv    = "AGENTD_ARCHIVE_CRASH_AT" // the point where the child stops
	crashURLEnv = "AGENTD_ARCHIVE_CRASH_URL"
	crashSeed   = 7
)

// crashChild is the kill -9 test's child process (this test binary run
// again): it archives a workspace into the store at $AGENTD_ARCHIVE_CRASH_URL,
// says "AT point" when Put reaches $AGENTD_ARCHIVE_CRASH_AT and waits
// there to be killed.
func crashChild() {
	point := os.Getenv(crashEnv)
	var calls atomic.Int32
	opts := Options{MemoryBytes: 1 << 20, Uploads: 4, hook: func(p string) {
		if p != point {
			return
		}
		if p == "blob-half" && calls.Add(1) < 3 {
			return // let two blobs through: the kill comes mid-upload
		}
		fmt.Println("AT", p)
		time.Sleep(time.Hour) // not select{}: with every goroutine blocked the runtime would exit
	}}
	data, err := tarBytes(workspace(crashSeed, 30))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(crashURLEnv), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	m, err := s.Put(ctx, "crash", "", bytes.NewReader(data))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("DONE", m.ID)
	os.Exit(0)
}

// TestPutKilled kills a process archiving a workspace with SIGKILL at
// several points and checks that the store then has either no archive
// and nothing that GC does not remove, or the complete, verified
// archive.
func TestPutKilled(t *testing.T) {
	t.Parallel()
	want := readTar(t, makeTar(t, workspace(crashSeed, 30)))
	for _, backend := range []string{"file", "s3"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testPutKilled(t, backend, want)
		})
	}
}

func testPutKilled(t *testing.T, backend string, want []tentry) {
	for _, tc := range []struct {
		point    string
		complete bool
	}{
		{"started", false},   // pending marker written, nothing uploaded
		{"blob-half", false}, // two blobs uploaded, more half written
		{"uploaded", false},  // every blob uploaded and read back, no manifest
		{"committed", true},  // manifest written, pending marker still there
	} {
		t.Run(tc.point, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "archive")
			url := "file://" + dir
			if backend == "s3" {
				url, _ = newS3(t)
			}
			killAt(t, tc.point, url)
			if backend == "file" && tc.point == "blob-half" && len(tmpFiles(t, dir)) == 0 {
				t.Error("no half-written blob in the store: the kill did not come mid-upload")
			}

			ctx := context.Background()
			opts := testOptions(t)
			opts.PendingTimeout = time.Nanosecond // the dead Put's marker is stale at once
			s, err := Open(ctx, url, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ids, err := s.List(ctx, "crash")
			if err != nil {
				t.Fatal(err)
			}
			if tc.complete {
				if len(ids) != 1 {
					t.Fatalf("List = %v; want the one archive", ids)
				}
				if err := s.Verify(ctx, "crash", ids[0]); err != nil {
					t.Fatalf("Verify: %v", err)
				}
			} else if len(ids) != 0 {
				t.Fatalf("List = %v; want no archive", ids)
			}

			st, err := s.GC(ctx, "crash")
			if err != nil {
				t.Fatalf("GC: %v", err)
			}
			if st.StalePending != 1 {
				t.Errorf("GC removed %d pending markers, want 1", st.StalePending)
			}
			if left := tmpFiles(t, dir); backend == "file" && len(left) != 0 {
				t.Errorf("after GC, half-written files remain: %v", left)
			}
			u, err := s.Usage(ctx, "crash")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.complete {
				if u != 0 {
					t.Errorf("after GC, %d bytes remain of an archive that never was", u)
				}
				return
			}
			if err := s.Verify(ctx, "crash", ids[0]); err != nil {
				t.Errorf("Verify after GC: %v", err)
			}
			if diff := cmp.Diff(want, readTar(t, restore(t, s, "crash", ids[0]))); diff != "" {
				t.Errorf("restored (-want +got):\n%s", diff)
			}
		})
	}
}

// killAt runs crashChild until it reports point, then kills it with
// SIGKILL.
func killAt(t *testing.T, point, url string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+point, crashURLEnv+"="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	reached := false
	for sc.Scan() {
		if sc.Text() == "AT "+point {
			reached = true
			break
		}
	}
	if !reached {
		err := cmd.Wait()
		t.Fatalf("the child never reached %q (%v): %s", point, err, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// tmpFiles lists the temporary files of unfinished writes under dir.
func tmpFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return nil // not a file:// store
		}
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".tmp") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
