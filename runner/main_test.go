//go:build unix

// The tests of this package start real commands through /bin/sh and check
// process groups, signals and ptys: they build and run on unix only. The
// Windows code (group_windows.go and the other _windows files) is
// cross-compiled and vetted, but not run by any test here.

package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestManager returns a Manager with test defaults (a temp working
// directory, /bin/sh, a test logger) that is closed at the end of the test.
func newTestManager(t testing.TB, opts Options) *Manager {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Shell == "" {
		opts.Shell = "/bin/sh"
	}
	m := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// result is what a subscription delivered.
type result struct {
	started Started
	out     map[Stream][]byte // data of Output events, concatenated
	gaps    []Gap
	events  []Event
	exit    ExitInfo
}

// collect reads sub to its end, checking that offsets are contiguous.
func collect(t testing.TB, sub *Subscription) result {
	t.Helper()
	res := result{out: map[Stream][]byte{}}
	next := map[Stream]int64{}
	for {
		ev, err := sub.Next()
		if errors.Is(err, io.EOF) {
			return res
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		switch e := ev.(type) {
		case Started:
			res.started = e
		case Output:
			if _, seen := next[e.Stream]; !seen {
				next[e.Stream] = e.Offset
			}
			if e.Offset != next[e.Stream] {
				t.Fatalf("%s output at offset %d, want %d", e.Stream, e.Offset, next[e.Stream])
			}
			if len(e.Data) == 0 || len(e.Data) > chunkSize {
				t.Fatalf("%s output of %d bytes", e.Stream, len(e.Data))
			}
			next[e.Stream] += int64(len(e.Data))
			res.out[e.Stream] = append(res.out[e.Stream], e.Data...)
		case Gap:
			if _, seen := next[e.Stream]; !seen {
				next[e.Stream] = e.Offset
			}
			if e.Offset != next[e.Stream] || e.Bytes <= 0 {
				t.Fatalf("gap %+v, want one at offset %d", e, next[e.Stream])
			}
			next[e.Stream] += e.Bytes
			res.gaps = append(res.gaps, e)
		case Exited:
			res.exit = e.ExitInfo
		}
		if _, ok := ev.(Output); !ok || len(res.events) < 1000 {
			res.events = append(res.events, ev)
		}
	}
}

// run starts spec attached and collects everything.
func run(t testing.TB, m *Manager, spec Spec) result {
	t.Helper()
	_, sub, err := m.StartAttached(t.Context(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer sub.Close()
	res := collect(t, sub)
	if _, ok := res.events[0].(Started); !ok {
		t.Fatalf("first event is %T, want Started", res.events[0])
	}
	return res
}

// waitFor reads sub until stream s has produced want, returning what came.
func waitFor(t testing.TB, sub *Subscription, want string) string {
	t.Helper()
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		ev, err := sub.Next()
		if err != nil {
			t.Fatalf("waiting for %q (have %q): %v", want, got.String(), err)
		}
		if o, ok := ev.(Output); ok {
			got.Write(o.Data)
		}
		if _, ok := ev.(Exited); ok {
			t.Fatalf("exited while waiting for %q (have %q)", want, got.String())
		}
	}
	return got.String()
}

func wantKind(t testing.TB, err error, kind errs.Kind, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want kind %v %q", kind, msg)
	}
	if got := errs.KindOf(err); got != kind {
		t.Errorf("kind of %q = %v, want %v", err, got, kind)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("err = %q, want it to contain %q", err, msg)
	}
}

func readPid(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

func killStray(t testing.TB, pid int) {
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}
