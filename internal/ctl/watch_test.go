package ctl_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/ctl"
)

// lockedBuffer is a bytes.Buffer safe to write from agentctl and read from
// the test at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// eventually waits until cond holds of buf or fails after d.
func eventually(t *testing.T, d time.Duration, buf *lockedBuffer, what string, cond func(string) bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(buf.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("within %s, no %s in:\n%s", d, what, buf.String())
		}
	}
}

// TestWatchCommand: agentctl watch against a real agentd prints the
// changes as they happen, one line per path, and Ctrl-C ends it with 130.
func TestWatchCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if r := d.run(t, "", "mkdir", "src"); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		wants func(ws string) []string
	}{
		{"lines", []string{"watch", "src", "--coalesce", "20ms"}, func(ws string) []string {
			return []string{"created    " + filepath.Join(ws, "src", "a.txt") + "\n", "created    " + filepath.Join(ws, "src", "lib") + "/\n"}
		}},
		{"json", []string{"--json", "watch", "src"}, func(ws string) []string {
			return []string{`{"ready":{"path":"` + filepath.Join(ws, "src") + `"`, `"kind":"FILE_EVENT_KIND_CREATED"`, `"directory":true`}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb := &lockedBuffer{}, &lockedBuffer{}
			sigs := make(chan os.Signal, 1)
			done := make(chan int, 1)
			go func() {
				done <- ctl.Main(t.Context(), append([]string{"--addr", d.addr}, tc.args...), ctl.IO{In: strings.NewReader(""), Out: out, Err: errb, Signals: sigs})
			}()
			ready := func(s string) bool { return strings.Contains(s, "watching ") }
			if tc.name == "json" {
				eventually(t, 30*time.Second, out, "ready message", func(s string) bool { return strings.Contains(s, `"ready"`) })
			} else {
				eventually(t, 30*time.Second, errb, "ready line", ready)
			}
			os.Remove(filepath.Join(d.workspace, "src", "a.txt"))
			os.RemoveAll(filepath.Join(d.workspace, "src", "lib"))
			if err := os.WriteFile(filepath.Join(d.workspace, "src", "a.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(d.workspace, "src", "lib"), 0o755); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, out, "both changes", func(s string) bool {
				for _, w := range tc.wants(d.workspace) {
					if !strings.Contains(s, w) {
						return false
					}
				}
				return true
			})
			sigs <- os.Interrupt
			if code := <-done; code != 130 {
				t.Errorf("after SIGINT: exit %d, want 130; stderr %q", code, errb.String())
			}
		})
	}
	// Bad input changes nothing and says what is wrong.
	if r := d.run(t, "", "watch", "nope"); r.code == 0 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("watch of a missing directory = %+v", r)
	}
	if r := d.run(t, "", "watch", "--coalesce", "1m"); r.code == 0 || !strings.Contains(r.stderr, "--coalesce") {
		t.Errorf("watch --coalesce 1m = %+v", r)
	}
}
