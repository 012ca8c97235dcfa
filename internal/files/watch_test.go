package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// watcher runs FS.Watch in the background and collects what it reports.
type watcher struct {
	mu       sync.Mutex
	events   []WatchEvent
	overflow []string
	batches  int
	changed  chan struct{}
	done     chan error
	stop     context.CancelFunc
}

// startWatch starts a watch and waits until it is in place.
func startWatch(t *testing.T, f *FS, opts WatchOptions) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &watcher{changed: make(chan struct{}, 1), done: make(chan error, 1), stop: cancel}
	ready := make(chan struct{})
	go func() {
		w.done <- f.Watch(ctx, opts, func(string, int) error { close(ready); return nil }, func(b WatchBatch) error {
			w.mu.Lock()
			w.batches++
			w.events = append(w.events, b.Events...)
			if b.Overflow != "" {
				w.overflow = append(w.overflow, b.Overflow)
			}
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	select {
	case <-ready:
	case err := <-w.done:
		t.Fatalf("Watch ended before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Watch was not ready within 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-w.done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	return w
}

// waitFor waits until cond holds of what was reported (checked after each
// batch), or fails after d.
func (w *watcher) waitFor(t *testing.T, d time.Duration, what string, cond func(evs []WatchEvent, overflow []string) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		w.mu.Lock()
		ok := cond(w.events, w.overflow)
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-deadline:
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("within %s, no %s; got %d events in %d batches, overflow %q: %v", d, what, len(w.events), w.batches, w.overflow, head(w.events, 20))
		}
	}
}

func head(evs []WatchEvent, n int) []WatchEvent {
	if len(evs) > n {
		return evs[:n]
	}
	return evs
}

func has(evs []WatchEvent, path string, op WatchOp) bool {
	for _, e := range evs {
		if e.Path == path && e.Op == op {
			return true
		}
	}
	return false
}

// TestWatchBurst: 10,000 files written in a burst are all reported as
// created, or an overflow says some were lost; never silently missed.
func TestWatchBurst(t *testing.T) {
	f, ws := newTestFS(t)
	w := startWatch(t, f, WatchOptions{})
	const n = 10000
	dir := filepath.Join(ws, "burst")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.waitFor(t, 2*time.Minute, "report of every file or an overflow", func(evs []WatchEvent, overflow []string) bool {
		if len(overflow) > 0 {
			return true
		}
		seen := map[string]bool{}
		for _, e := range evs {
			if e.Op == WatchCreated {
				seen[e.Path] = true
			}
		}
		for i := range n {
			if !seen[filepath.Join(dir, fmt.Sprintf("f%05d", i))] {
				return false
			}
		}
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.overflow) > 0 {
		t.Logf("overflow reported after %d events: %s", len(w.events), w.overflow[0])
	} else if w.batches < 2 {
		// 10,000 events do not fit in one batch: a batch is bounded.
		t.Errorf("%d events came in %d batch(es), want several of at most %d", len(w.events), w.batches, maxWatchBatch)
	}
}

// TestWatchOverflowReported: the kernel's overflow event reaches the
// caller as an overflow batch, after the events gathered before it.
func TestWatchOverflowReported(t *testing.T) {
	var p pending
	p.add(WatchEvent{Path: "/w/a", Op: WatchCreated})
	p.overflow = "lost"
	if b := p.take(10); len(b.Events) != 1 || b.Overflow != "" {
		t.Fatalf("first batch = %+v, want the event alone", b)
	}
	if b := p.take(10); b.Overflow != "lost" || len(b.Events) != 0 {
		t.Fatalf("second batch = %+v, want the overflow", b)
	}
}

// TestWatchChanges: writes, renames and deletes are reported, a new
// directory's files (even those written before its watch was in place)
// are reported, and created-then-written in one window stays created.
func TestWatchChanges(t *testing.T) {
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"old.txt": "1", "gone.txt": "2", "sub/keep.txt": "3"})
	w := startWatch(t, f, WatchOptions{Coalesce: 20 * time.Millisecond})

	if err := os.WriteFile(filepath.Join(ws, "sub", "keep.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ws, "old.txt"), filepath.Join(ws, "new.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	// A tree made in one go: its inner files may land before their
	// directory's watch does.
	deep := filepath.Join(ws, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "deep.txt"), []byte("d"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		path string
		op   WatchOp
	}{
		{"sub/keep.txt", WatchWritten},
		{"old.txt", WatchRenamed},
		{"new.txt", WatchCreated},
		{"gone.txt", WatchRemoved},
		{"a", WatchCreated},
		{"a/b/c/deep.txt", WatchCreated},
	}
	w.waitFor(t, 30*time.Second, "report of every change", func(evs []WatchEvent, _ []string) bool {
		for _, c := range want {
			if !has(evs, filepath.Join(ws, c.path), c.op) {
				return false
			}
		}
		return true
	})
	// A file written after its directory is watched: a later change.
	if err := os.WriteFile(filepath.Join(deep, "deep.txt"), []byte("again"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, 30*time.Second, "write in the new directory", func(evs []WatchEvent, _ []string) bool {
		return has(evs, filepath.Join(deep, "deep.txt"), WatchWritten)
	})
	// Removing a watched directory reports it and stops watching it.
	if err := os.RemoveAll(filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, 30*time.Second, "removal of the directory", func(evs []WatchEvent, _ []string) bool {
		return has(evs, filepath.Join(ws, "a"), WatchRemoved)
	})
}

// TestWatchIgnores: hidden names, .git and .gitignore'd paths are not
// reported unless asked for.
func TestWatchIgnores(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts WatchOptions
		want map[string]bool // relative path → reported
	}{
		{"default", WatchOptions{}, map[string]bool{"app.go": true, "build/out.bin": false, ".env": false, ".git/index": false}},
		{"hidden and no-ignore", WatchOptions{Hidden: true, NoIgnore: true}, map[string]bool{"app.go": true, "build/out.bin": true, ".env": true, ".git/index": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ws := newTestFS(t)
			writeFiles(t, ws, map[string]string{".gitignore": "build/\n", "build/": "", ".git/": ""})
			opts := tc.opts
			opts.Coalesce = 20 * time.Millisecond
			w := startWatch(t, f, opts)
			for rel := range tc.want {
				if err := os.WriteFile(filepath.Join(ws, rel), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A marker written last: once it is reported, so is
			// everything before it.
			if err := os.WriteFile(filepath.Join(ws, "zz-marker"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			w.waitFor(t, 30*time.Second, "the marker", func(evs []WatchEvent, _ []string) bool {
				return has(evs, filepath.Join(ws, "zz-marker"), WatchCreated)
			})
			w.mu.Lock()
			defer w.mu.Unlock()
			for rel, want := range tc.want {
				if got := has(w.events, filepath.Join(ws, rel), WatchCreated); got != want {
					t.Errorf("%s reported = %v, want %v (events %v)", rel, got, want, w.events)
				}
			}
		})
	}
}

// TestWatchBadInput: a file, a missing path and a window out of range are
// refused with a clear error.
func TestWatchBadInput(t *testing.T) {
	f, ws := newTestFS(t)
	writeFiles(t, ws, map[string]string{"file.txt": "x"})
	noop := func(string, int) error { return nil }
	emit := func(WatchBatch) error { return nil }
	for _, tc := range []struct {
		opts WatchOptions
		kind errs.Kind
	}{
		{WatchOptions{Path: "file.txt"}, errs.Invalid},
		{WatchOptions{Path: "missing"}, errs.NotFound},
		{WatchOptions{Coalesce: time.Minute}, errs.Invalid},
		{WatchOptions{Coalesce: -time.Second}, errs.Invalid},
	} {
		err := f.Watch(t.Context(), tc.opts, noop, emit)
		if errs.KindOf(err) != tc.kind {
			t.Errorf("Watch(%+v) = %v, want kind %v", tc.opts, err, tc.kind)
		}
	}
}

// TestWatchGitignoreChanged: a .gitignore written while watching (and not
// reported itself: it is hidden) applies from then on.
func TestWatchGitignoreChanged(t *testing.T) {
	f, ws := newTestFS(t)
	w := startWatch(t, f, WatchOptions{Coalesce: 20 * time.Millisecond})
	// As editors save: a temp file renamed over it.
	tmp := filepath.Join(ws, ".gitignore.tmp")
	if err := os.WriteFile(tmp, []byte("*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(ws, ".gitignore")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.log", "b.txt", "zz-marker"} {
		if err := os.WriteFile(filepath.Join(ws, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.waitFor(t, 30*time.Second, "the marker", func(evs []WatchEvent, _ []string) bool {
		return has(evs, filepath.Join(ws, "zz-marker"), WatchCreated)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if has(w.events, filepath.Join(ws, "a.log"), WatchCreated) || !has(w.events, filepath.Join(ws, "b.txt"), WatchCreated) {
		t.Errorf("after .gitignore said *.log: events %v; want b.txt and not a.log", w.events)
	}
}

// TestWatchRootRemoved: the watch ends with NotFound when its directory
// goes, rather than staying open and quiet.
func TestWatchRootRemoved(t *testing.T) {
	f, ws := newTestFS(t)
	dir := filepath.Join(ws, "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- f.Watch(t.Context(), WatchOptions{Path: dir}, func(string, int) error { close(ready); return nil }, func(WatchBatch) error { return nil })
	}()
	<-ready
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if errs.KindOf(err) != errs.NotFound {
			t.Errorf("Watch after its directory was removed = %v, want NotFound", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Watch went on for 30 s after its directory was removed")
	}
}
