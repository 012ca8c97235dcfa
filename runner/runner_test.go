//go:build unix

package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/devdepot-ai/agentd/internal/errs"
)

func TestStdoutStderrSeparate(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	res := run(t, m, Spec{Command: `printf 'out\000\377bin'; printf 'err\n' >&2; printf more; exit 3`})
	if got, want := string(res.out[StreamStdout]), "out\x00\xffbinmore"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := string(res.out[StreamStderr]), "err\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if res.exit.Code != 3 || res.exit.Signal != "" || res.exit.TimedOut {
		t.Errorf("exit = %+v, want code 3", res.exit)
	}
	want := []StreamStats{
		{Stream: StreamStdout, Total: 12, Retained: 12},
		{Stream: StreamStderr, Total: 4, Retained: 4},
	}
	if diff := cmp.Diff(res.exit.Streams, want); diff != "" {
		t.Errorf("stream stats (-got +want):\n%s", diff)
	}
	if res.started.PID <= 0 || !strings.HasPrefix(res.started.ID, "p-") || len(res.started.ID) != 12 {
		t.Errorf("started = %+v", res.started)
	}
}

// TestLargeOutputLossless pushes 20 MB of random bytes through a retention
// window of 128 KiB: the attached subscriber must get every byte.
func TestLargeOutputLossless(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	data := make([]byte, 20<<20)
	rand.Read(data)
	file := filepath.Join(t.TempDir(), "random")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	res := run(t, m, Spec{Argv: []string{"cat", file}, RetainHead: 64 << 10, RetainTail: 64 << 10})
	if got, want := sha256.Sum256(res.out[StreamStdout]), sha256.Sum256(data); got != want {
		t.Fatalf("stdout: %d bytes, sha256 %x; want %d bytes, %x", len(res.out[StreamStdout]), got, len(data), want)
	}
	if len(res.gaps) != 0 {
		t.Errorf("live subscriber got gaps %v", res.gaps)
	}
	st := res.exit.Streams[0]
	if st.Total != int64(len(data)) || st.Retained != 128<<10 || st.Omitted != st.Total-st.Retained {
		t.Errorf("stdout stats = %+v", st)
	}
}

// TestLateAttach attaches after the process finished: head, gap, tail.
func TestLateAttach(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	const n, head, tail = 1_000_000, 100_000, 64 << 10
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := m.Start(t.Context(), Spec{Argv: []string{"cat", file}, RetainHead: head, RetainTail: tail})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h, tl, cut := p.Excerpt(StreamStdout, 10); !bytes.Equal(h, data[:10]) || !bytes.Equal(tl, data[n-10:]) || !cut {
		t.Errorf("Excerpt(10) = %v, %v, %v", h, tl, cut)
	}
	if h, tl, cut := p.Excerpt(StreamStdout, n); !bytes.Equal(h, slices.Concat(data[:head], data[n-tail:])) || len(tl) != 0 || !cut {
		t.Errorf("Excerpt(n) = %d, %d bytes, %v", len(h), len(tl), cut)
	}

	for _, tc := range []struct {
		name     string
		from     int64
		wantGaps []Gap
		wantData []byte // what the Output events carry, concatenated
	}{
		{"from 0", 0, []Gap{{StreamStdout, head, n - head - tail}}, slices.Concat(data[:head], data[n-tail:])},
		{"from head", 5_000, []Gap{{StreamStdout, head, n - head - tail}}, slices.Concat(data[5_000:head], data[n-tail:])},
		{"from gap", 500_000, []Gap{{StreamStdout, 500_000, n - tail - 500_000}}, data[n-tail:]},
		{"from tail", n - 100, nil, data[n-100:]},
		{"from end", n, nil, nil},
		{"past end", n + 5, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := m.Attach(t.Context(), p.ID(), Offsets{Stdout: tc.from})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			res := collect(t, sub)
			if diff := cmp.Diff(res.gaps, tc.wantGaps); diff != "" {
				t.Errorf("gaps (-got +want):\n%s", diff)
			}
			if !bytes.Equal(res.out[StreamStdout], tc.wantData) {
				t.Errorf("got %d bytes of output, want %d (content differs: %v)", len(res.out[StreamStdout]), len(tc.wantData), len(res.out[StreamStdout]) == len(tc.wantData))
			}
			want := StreamStats{StreamStdout, n, head + tail, n - head - tail}
			if diff := cmp.Diff(res.exit.Streams[0], want); diff != "" {
				t.Errorf("stats (-got +want):\n%s", diff)
			}
		})
	}
}

func TestTimeoutKillsGrandchild(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	pidfile := filepath.Join(t.TempDir(), "pid")
	res := run(t, m, Spec{
		Command: `sleep 300 & echo $! > ` + pidfile + `; wait`,
		Timeout: 300 * time.Millisecond,
		Grace:   5 * time.Second,
	})
	pid := readPid(t, pidfile)
	killStray(t, pid)
	if !res.exit.TimedOut || res.exit.Signal != "TERM" || res.exit.Code != -1 {
		t.Errorf("exit = %+v, want timed out by TERM", res.exit)
	}
	if res.exit.Duration >= 5*time.Second {
		t.Errorf("took %v: SIGTERM did not end it", res.exit.Duration)
	}
	if !processGone(pid) {
		t.Errorf("grandchild %d survived the timeout", pid)
	}
}

func TestTermIgnoredGetsKill(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	const grace = 300 * time.Millisecond
	p, sub, err := m.StartAttached(t.Context(), Spec{Command: `trap '' TERM; echo ready; sleep 300; echo survived`, Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	waitFor(t, sub, "ready")
	sent := time.Now()
	if err := p.Signal(syscall.SIGTERM, 0); err != nil {
		t.Fatal(err)
	}
	res := collect(t, sub)
	if res.exit.Signal != "KILL" || res.exit.SignalNumber != 9 || res.exit.TimedOut {
		t.Errorf("exit = %+v, want killed by KILL", res.exit)
	}
	if d := time.Since(sent); d < grace {
		t.Errorf("killed after %v, before the grace of %v", d, grace)
	}
	if strings.Contains(string(res.out[StreamStdout]), "survived") {
		t.Error("the sleep survived")
	}
}

// TestOrphanKilledWithLeader: the leader dies of SIGTERM at once, a member
// of its group ignores it; the member must die when the leader exits, not
// only after the grace period.
func TestOrphanKilledWithLeader(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	pidfile := filepath.Join(t.TempDir(), "pid")
	p, sub, err := m.StartAttached(t.Context(), Spec{
		Command: `(trap '' TERM; exec sleep 300) & echo $! > ` + pidfile + `; echo ready; wait`,
		Grace:   time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	waitFor(t, sub, "ready")
	pid := readPid(t, pidfile)
	killStray(t, pid)
	if err := p.Signal(syscall.SIGTERM, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	exit, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v (the orphan kept the process alive)", err)
	}
	if exit.Signal != "TERM" {
		t.Errorf("exit = %+v, want TERM", exit)
	}
	if !processGone(pid) {
		t.Errorf("orphan %d survived", pid)
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	for _, tc := range []struct {
		cmd    string
		code   int
		signal string
	}{
		{"exit 0", 0, ""},
		{"exit 42", 42, ""},
		{"kill -USR1 $$", -1, "USR1"},
		{"kill -KILL $$", -1, "KILL"},
		{"kill -SEGV $$", -1, "SEGV"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			res := run(t, m, Spec{Command: tc.cmd})
			if res.exit.Code != tc.code || res.exit.Signal != tc.signal || res.exit.TimedOut {
				t.Errorf("exit = %+v, want code %d signal %q", res.exit, tc.code, tc.signal)
			}
		})
	}
}

func TestSignalDelivered(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(SignalName(sig), func(t *testing.T) {
			t.Parallel()
			p, err := m.Start(t.Context(), Spec{Argv: []string{"sleep", "300"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Signal(p.ID(), sig, 0); err != nil {
				t.Fatal(err)
			}
			info, err := m.Wait(t.Context(), p.ID())
			if err != nil {
				t.Fatal(err)
			}
			if info.State != StateExited || info.Exit.Signal != SignalName(sig) {
				t.Errorf("info = %+v, exit %+v; want killed by %s", info, info.Exit, SignalName(sig))
			}
			err = m.Signal(p.ID(), syscall.SIGTERM, 0)
			wantKind(t, err, errs.Precondition, "already exited")
		})
	}
}

func TestPty(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{Env: []string{"PATH=/usr/bin:/bin"}})
	res := run(t, m, Spec{Command: "tty; stty size; echo $TERM; echo err >&2", Pty: &PtySize{Rows: 30, Cols: 100}})
	got := string(res.out[StreamPty])
	if !regexp.MustCompile(`^/dev/pts/\d+\r\n30 100\r\nxterm-256color\r\nerr\r\n$`).MatchString(got) {
		t.Errorf("pty output = %q", got)
	}
	if len(res.out[StreamStdout]) != 0 || len(res.out[StreamStderr]) != 0 {
		t.Errorf("output outside the pty stream: %v", res.out)
	}
	if len(res.exit.Streams) != 1 || res.exit.Streams[0].Stream != StreamPty {
		t.Errorf("streams = %+v", res.exit.Streams)
	}
}

func TestPtyResizeAndInput(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	p, sub, err := m.StartAttached(t.Context(), Spec{Command: "read x; stty size; echo got $x", Pty: &PtySize{Rows: 10, Cols: 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := m.Resize(p.ID(), PtySize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	if err := p.Input(t.Context(), []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	res := collect(t, sub)
	if got := string(res.out[StreamPty]); !strings.Contains(got, "40 120\r\ngot hello\r\n") {
		t.Errorf("output = %q", got)
	}
	if res.exit.Code != 0 {
		t.Errorf("exit = %+v", res.exit)
	}
	wantKind(t, p.Resize(PtySize{Rows: 1, Cols: 1}), errs.Precondition, "exited")

	q, err := m.Start(t.Context(), Spec{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, q.Resize(PtySize{Rows: 1, Cols: 1}), errs.Precondition, "has no pty")
}

func TestStdinOrderedWithEOF(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	p, sub, err := m.StartAttached(t.Context(), Spec{Argv: []string{"cat"}, OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !p.Info().StdinOpen {
		t.Error("StdinOpen = false")
	}
	var want bytes.Buffer
	for i := range 500 {
		line := []byte(fmt.Sprintf("line %d %s\n", i, strings.Repeat("x", i)))
		want.Write(line)
		if err := m.Input(t.Context(), p.ID(), line); err != nil {
			t.Fatalf("Input %d: %v", i, err)
		}
	}
	if err := m.CloseInput(t.Context(), p.ID()); err != nil {
		t.Fatal(err)
	}
	wantKind(t, p.Input(t.Context(), []byte("late")), errs.Precondition, "closed")
	res := collect(t, sub)
	if !bytes.Equal(res.out[StreamStdout], want.Bytes()) {
		t.Errorf("cat echoed %d bytes, want %d", len(res.out[StreamStdout]), want.Len())
	}
	if res.exit.Code != 0 {
		t.Errorf("exit = %+v", res.exit)
	}
	wantKind(t, p.Input(t.Context(), []byte("x")), errs.Precondition, "")
}

func TestStdinBytes(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	data := make([]byte, 1<<20) // more than a pipe holds
	rand.Read(data)
	res := run(t, m, Spec{Argv: []string{"cat"}, Stdin: data})
	if !bytes.Equal(res.out[StreamStdout], data) {
		t.Errorf("cat echoed %d bytes, want %d identical", len(res.out[StreamStdout]), len(data))
	}
	res = run(t, m, Spec{Argv: []string{"cat"}})
	if res.exit.Code != 0 || len(res.out[StreamStdout]) != 0 {
		t.Errorf("cat with no stdin: %+v %q", res.exit, res.out)
	}
}

func TestInputNotOpen(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	p, err := m.Start(t.Context(), Spec{Argv: []string{"cat"}, Stdin: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, p.Input(t.Context(), []byte("y")), errs.Precondition, "without open stdin")
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestInputCancelled: a process that never reads its stdin must not hang
// an Input call past its context.
func TestInputCancelled(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	p, err := m.Start(t.Context(), Spec{Argv: []string{"sleep", "300"}, OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err = p.Input(ctx, make([]byte, 4<<20))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Input = %v, want deadline exceeded", err)
	}
	if err := p.Signal(syscall.SIGKILL, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	base := append(os.Environ(), "AGENTD_FOO=secret", "AGENTD_TOKEN=tok", "PATH=/usr/bin:/bin", "KEEP=base", "OVER=base")
	m := newTestManager(t, Options{Env: base})
	dir := m.opts.Dir
	res := run(t, m, Spec{Argv: []string{"env"}, Env: map[string]string{"OVER": "spec", "NEW": "a=b"}})
	env := strings.Split(strings.TrimSpace(string(res.out[StreamStdout])), "\n")
	for _, kv := range env {
		if strings.HasPrefix(kv, "AGENTD_") {
			t.Errorf("child sees %s", kv)
		}
	}
	for _, want := range []string{"KEEP=base", "OVER=spec", "NEW=a=b", "PWD=" + dir, "PATH=/usr/bin:/bin"} {
		if !slices.Contains(env, want) {
			t.Errorf("child env lacks %s: %q", want, env)
		}
	}
	if slices.Contains(env, "OVER=base") {
		t.Error("OVER set twice")
	}

	_, err := m.Start(t.Context(), Spec{Argv: []string{"env"}, Env: map[string]string{"AGENTD_X": "1"}})
	wantKind(t, err, errs.Invalid, "AGENTD_X")
}

func TestNoExtraFDs(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	for _, pty := range []*PtySize{nil, {}} {
		res := run(t, m, Spec{Argv: []string{"ls", "/proc/self/fd"}, Pty: pty, OpenStdin: true})
		out := res.out[StreamStdout]
		if pty != nil {
			out = res.out[StreamPty]
		}
		if got := strings.Fields(string(out)); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
			t.Errorf("pty %v: child's fds = %q, want 0 1 2 and ls's own 3", pty != nil, got)
		}
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	dir := m.opts.Dir
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		kind errs.Kind
		msg  string
	}{
		{"no cwd", Spec{Argv: []string{"true"}, Dir: "/nonexistent/x"}, errs.NotFound, "cwd /nonexistent/x does not exist"},
		{"relative cwd", Spec{Argv: []string{"true"}, Dir: "sub"}, errs.NotFound, "cwd " + filepath.Join(dir, "sub") + " does not exist"},
		{"cwd is a file", Spec{Argv: []string{"true"}, Dir: file}, errs.Invalid, "is not a directory"},
		{"not found", Spec{Argv: []string{"no-such-command-xyz"}}, errs.NotFound, "command not found: no-such-command-xyz"},
		{"path not found", Spec{Argv: []string{"./nope"}}, errs.NotFound, "command not found: ./nope"},
		{"not executable", Spec{Argv: []string{"./file"}}, errs.Permission, "permission denied"},
		{"directory", Spec{Argv: []string{"/tmp"}}, errs.Invalid, "is a directory"},
		{"NUL in argv", Spec{Argv: []string{"echo", "a\x00b"}}, errs.Invalid, "argv[1] contains a NUL byte"},
		{"NUL in command", Spec{Command: "echo \x00"}, errs.Invalid, "NUL"},
		{"NUL in cwd", Spec{Argv: []string{"true"}, Dir: "/tmp\x00"}, errs.Invalid, "NUL"},
		{"NUL in env value", Spec{Argv: []string{"true"}, Env: map[string]string{"A": "\x00"}}, errs.Invalid, "NUL"},
		{"= in env name", Spec{Argv: []string{"true"}, Env: map[string]string{"A=B": "c"}}, errs.Invalid, `"A=B"`},
		{"empty env name", Spec{Argv: []string{"true"}, Env: map[string]string{"": "c"}}, errs.Invalid, "env name"},
		{"both", Spec{Argv: []string{"true"}, Command: "true"}, errs.Invalid, "not both"},
		{"neither", Spec{}, errs.Invalid, "nothing to run"},
		{"empty argv0", Spec{Argv: []string{""}}, errs.Invalid, "argv[0] is empty"},
		{"negative timeout", Spec{Argv: []string{"true"}, Timeout: -1}, errs.Invalid, "timeout"},
		{"huge retention", Spec{Argv: []string{"true"}, RetainTail: 1 << 40}, errs.Invalid, "retain tail"},
		{"head over 1 GiB", Spec{Argv: []string{"true"}, RetainHead: 1<<30 + 1}, errs.Invalid, "retain head"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Start(t.Context(), tc.spec)
			wantKind(t, err, tc.kind, tc.msg)
		})
	}
	if got := len(m.List()); got != 0 {
		t.Errorf("%d processes after failed starts", got)
	}
}

func TestUnknownID(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	_, err := m.Attach(t.Context(), "p-0000000000", Offsets{})
	wantKind(t, err, errs.NotFound, `no process "p-0000000000"`)
	_, err = m.Wait(t.Context(), "p-x")
	wantKind(t, err, errs.NotFound, "no process")
	wantKind(t, m.Signal("p-x", syscall.SIGTERM, 0), errs.NotFound, "no process")
	wantKind(t, m.Input(t.Context(), "p-x", nil), errs.NotFound, "no process")
	_, err = m.Get("p-x")
	wantKind(t, err, errs.NotFound, "no process")
}

func TestSurvivesCancelledAttach(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	p, sub, err := m.StartAttached(ctx, Spec{Command: "echo first; cat", OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, sub, "first")
	cancel()
	if _, err := sub.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v, want Canceled", err)
	}
	if st := p.Info().State; st != StateRunning {
		t.Fatalf("state after cancelled attach = %v", st)
	}
	if err := p.Input(t.Context(), []byte("second\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseInput(t.Context()); err != nil {
		t.Fatal(err)
	}
	sub2, err := m.Attach(t.Context(), p.ID(), Offsets{})
	if err != nil {
		t.Fatal(err)
	}
	res := collect(t, sub2)
	if got := string(res.out[StreamStdout]); got != "first\nsecond\n" || res.exit.Code != 0 {
		t.Errorf("output %q, exit %+v", got, res.exit)
	}
}

// TestStalledSubscriber: a subscriber that stops reading holds the output
// back only for StallTimeout; then the process runs on and the subscriber
// is told of the bytes it missed.
func TestStalledSubscriber(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{StallTimeout: 100 * time.Millisecond})
	const n = 4 << 20
	p, sub, err := m.StartAttached(t.Context(), Spec{Argv: []string{"head", "-c", fmt.Sprint(n), "/dev/zero"}, RetainHead: 1, RetainTail: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("a stalled subscriber blocked the process: %v", err)
	}
	res := collect(t, sub)
	if len(res.gaps) != 1 {
		t.Fatalf("gaps = %v, want one", res.gaps)
	}
	if got := int64(len(res.out[StreamStdout])) + res.gaps[0].Bytes; got != n {
		t.Errorf("output %d + gap %d bytes, want %d", len(res.out[StreamStdout]), res.gaps[0].Bytes, n)
	}
}

func TestListGetLinger(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var clock = func() time.Time { return now }
	m := newTestManager(t, Options{Now: func() time.Time { return clock() }, Linger: time.Minute})
	a, err := m.Start(t.Context(), Spec{Argv: []string{"true"}, Tag: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := m.Start(t.Context(), Spec{Command: "sleep 300", Tag: "second"})
	if err != nil {
		t.Fatal(err)
	}
	list := m.List()
	if len(list) != 2 || list[0].ID != a.ID() || list[1].ID != b.ID() {
		t.Fatalf("List = %+v", list)
	}
	if l := list[0]; l.State != StateExited || l.Exit == nil || l.Exit.Code != 0 || l.Tag != "first" || !slices.Equal(l.Argv, []string{"true"}) {
		t.Errorf("first = %+v", l)
	}
	if l := list[1]; l.State != StateRunning || l.Exit != nil || l.Command != "sleep 300" ||
		!slices.Equal(l.Argv, []string{"/bin/sh", "-c", "sleep 300"}) || l.PID <= 0 || !l.StartTime.Equal(now) || l.Dir != m.opts.Dir {
		t.Errorf("second = %+v", l)
	}

	clock = func() time.Time { return now.Add(2 * time.Minute) }
	if _, err := m.Get(a.ID()); errs.KindOf(err) != errs.NotFound {
		t.Errorf("Get after linger = %v, want NotFound", err)
	}
	if _, err := m.Get(b.ID()); err != nil {
		t.Errorf("running process forgotten: %v", err)
	}
	if err := b.Signal(syscall.SIGKILL, 0); err != nil {
		t.Fatal(err)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	m := New(Options{Dir: t.TempDir(), Shell: "/bin/sh", DefaultGrace: 200 * time.Millisecond})
	p1, err := m.Start(t.Context(), Spec{Argv: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	p2, sub, err := m.StartAttached(t.Context(), Spec{Command: "trap '' TERM; echo ready; sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, sub, "ready")
	sub.Close()
	if err := m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e := p1.Info().Exit; e == nil || e.Signal != "TERM" {
		t.Errorf("sleep: %+v", e)
	}
	if e := p2.Info().Exit; e == nil || e.Signal != "KILL" {
		t.Errorf("TERM-ignoring shell: %+v", e)
	}
	_, err = m.Start(t.Context(), Spec{Argv: []string{"true"}})
	wantKind(t, err, errs.Unavailable, "shutting down")
}

// TestBackgroundKeepsOutputOpen: a background process that keeps the output
// open does not keep the process running after its leader exits.
func TestBackgroundKeepsOutputOpen(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{DrainTimeout: 200 * time.Millisecond})
	pidfile := filepath.Join(t.TempDir(), "pid")
	res := run(t, m, Spec{Command: "sleep 300 & echo $! > " + pidfile + "; echo done"})
	killStray(t, readPid(t, pidfile))
	if string(res.out[StreamStdout]) != "done\n" || res.exit.Code != 0 {
		t.Errorf("output %q, exit %+v", res.out[StreamStdout], res.exit)
	}
}

func TestManyAttachedSubscribers(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	p, err := m.Start(t.Context(), Spec{Command: "read x; head -c 3000000 /dev/urandom", OpenStdin: true, RetainHead: 1, RetainTail: 1})
	if err != nil {
		t.Fatal(err)
	}
	subs := make([]*Subscription, 3)
	for i := range subs {
		if subs[i], err = p.Attach(t.Context(), Offsets{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Input(t.Context(), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	results := make(chan result, len(subs))
	for _, s := range subs {
		go func() {
			defer s.Close()
			results <- collect(t, s)
		}()
	}
	var first []byte
	for range subs {
		res := <-results
		if len(res.out[StreamStdout]) != 3000000 || len(res.gaps) != 0 {
			t.Fatalf("subscriber got %d bytes, gaps %v", len(res.out[StreamStdout]), res.gaps)
		}
		if first == nil {
			first = res.out[StreamStdout]
		} else if !bytes.Equal(first, res.out[StreamStdout]) {
			t.Error("subscribers got different bytes")
		}
	}
}

func TestLoginEnv(t *testing.T) {
	home := t.TempDir()
	profile := "echo noise from the profile\nprintf 'more\\000noise'\nexport FROM_PROFILE=yes\nexport AGENTD_LEAK=1\n"
	if err := os.WriteFile(filepath.Join(home, ".profile"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	env, err := LoginEnv(t.Context(), "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "FROM_PROFILE=yes") {
		t.Errorf("login env lacks the profile's variable: %q", env)
	}
	if _, ok := LookupEnv(env, "PATH"); !ok {
		t.Error("login env has no PATH")
	}
	if slices.Contains(CleanEnv(env), "AGENTD_LEAK=1") {
		t.Error("CleanEnv kept AGENTD_LEAK")
	}
	if _, err := LoginEnv(t.Context(), "/nonexistent/shell"); err == nil {
		t.Error("LoginEnv with a missing shell succeeded")
	}
}

func TestParseSignal(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]syscall.Signal{
		"TERM": syscall.SIGTERM, "sigkill": syscall.SIGKILL, "SIGINT": syscall.SIGINT, " hup ": syscall.SIGHUP, "10": syscall.SIGUSR1,
	} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "NOPE", "0", "99", "-1"} {
		if _, err := ParseSignal(in); errs.KindOf(err) != errs.Invalid {
			t.Errorf("ParseSignal(%q) = %v, want Invalid", in, err)
		}
	}
}

func TestAttachNegativeOffset(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	p, err := m.Start(t.Context(), Spec{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Attach(t.Context(), Offsets{Stdout: -1})
	wantKind(t, err, errs.Invalid, "negative")
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// With ReuseBuffer, every Output arrives in the subscription's one buffer
// and still carries exactly the process's bytes, in order.
func TestReuseBuffer(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Options{})
	const n = 3_000_000 // many chunks, through the head and into the tail
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p, sub, err := m.StartAttached(t.Context(), Spec{Argv: []string{"cat", file}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sub.ReuseBuffer()
	var got []byte
	var prev *byte // the backing array of the previous Output's data
	reused := 0
	for {
		ev, err := sub.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := ev.(Output); ok {
			got = append(got, o.Data...) // consumed before the next Next
			if &o.Data[:1][0] == prev {
				reused++
			}
			prev = &o.Data[:1][0]
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, not the %d the process wrote, in order", len(got), n)
	}
	if reused == 0 {
		t.Error("every Output came in a new buffer; want the subscription's buffer reused")
	}
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}
