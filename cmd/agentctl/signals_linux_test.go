package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/hub/hubtest"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// promptly bounds the time from the signal to agentctl's exit. Commands
// blocked on a call stop in milliseconds; one blocked writing to a pipe
// nobody reads leaves after agentctl's one-second grace.
const promptly = 2500 * time.Millisecond

// TestLongCommandsStopOnSignal runs each command that can run long as a
// real agentctl process, against a real daemon on a unix socket and
// through a real hub to a real paired `agentd run`, waits until it is
// observably under way, sends SIGINT or SIGTERM, and checks that it exits
// promptly with 130 or 143, that its call ended on the daemon too, and
// that it left nothing behind that looks complete. exec keeps forwarding
// the signal to the remote command and exits with that command's code.
func TestLongCommandsStopOnSignal(t *testing.T) {
	t.Parallel()
	targets := map[string]func(*testing.T) *target{"local": startLocal, "hub": startViaHub}
	for name, start := range targets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tg := start(t)
			snapID := tg.prepare(t)
			for _, lc := range longCases(snapID) {
				t.Run(lc.name, func(t *testing.T) {
					t.Parallel()
					// One signal after the other: the daemon's records of
					// each run are then told apart by their order.
					for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
						t.Run(unix.SignalName(sig), func(t *testing.T) { tg.signalled(t, lc, sig) })
					}
				})
			}
		})
	}
}

// longCase is one long command. start starts it and returns once it is
// observably under way, with a check to run after agentctl exited.
type longCase struct {
	name  string
	start func(t *testing.T, tg *target, sig syscall.Signal) (*proc, func(t *testing.T))
	// wantCode is the exit code; 0: 128+N for signal N.
	wantCode int
}

func longCases(snapID string) []longCase {
	return []longCase{{
		name: "activity -f",
		start: func(t *testing.T, tg *target, _ syscall.Signal) (*proc, func(*testing.T)) {
			tg.must(t, "stat", ".") // a record to show
			p := tg.start(t, nil, "activity", "-f")
			p.line(t)
			return p, nil
		},
	}, {
		// A search with far more output than any buffer on the way: its
		// first line is read and then nothing more, so agentctl blocks
		// writing to its stdout, as under a pager that stopped reading.
		name: "grep",
		start: func(t *testing.T, tg *target, sig syscall.Signal) (*proc, func(*testing.T)) {
			seq := tg.lastSeq(t)
			p := tg.start(t, nil, "grep", "-F", "-C", "50", "--max", "100000", "needle", "tree")
			p.line(t)
			return p, func(t *testing.T) { tg.waitFailedRecord(t, seq, "files.search") }
		},
	}, {
		name: "write from a pipe",
		start: func(t *testing.T, tg *target, sig syscall.Signal) (*proc, func(*testing.T)) {
			seq := tg.lastSeq(t)
			dir := filepath.Join(tg.ws, "write-"+unix.SignalName(sig))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			in := tg.pipeIn(t, bytes.Repeat([]byte("x"), 16<<10))
			p := tg.start(t, in, "write", filepath.Join(dir, "out.txt"))
			// The daemon has the call: its temp file is there.
			waitFor(t, "the daemon's temp file", func() bool { return len(dirNames(t, dir)) > 0 })
			return p, func(t *testing.T) {
				tg.waitFailedRecord(t, seq, "files.write")
				waitFor(t, "the temp file to go", func() bool { return len(dirNames(t, dir)) == 0 })
			}
		},
	}, {
		name: "snapshot import from a pipe",
		start: func(t *testing.T, tg *target, sig syscall.Signal) (*proc, func(*testing.T)) {
			var archive bytes.Buffer
			tw := tar.NewWriter(&archive)
			if err := tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 1 << 20, Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(make([]byte, 16<<10)); err != nil { // and the rest never comes
				t.Fatal(err)
			}
			label := "interrupted-" + unix.SignalName(sig)
			in := tg.pipeIn(t, archive.Bytes())
			p := tg.start(t, in, "snapshot", "import", "--label", label)
			return p, func(t *testing.T) {
				if out := tg.must(t, "snapshot", "list"); strings.Contains(out, label) {
					t.Errorf("an interrupted import stored a snapshot:\n%s", out)
				}
			}
		},
	}, {
		name: "snapshot export -o",
		start: func(t *testing.T, tg *target, sig syscall.Signal) (*proc, func(*testing.T)) {
			seq := tg.lastSeq(t)
			dir := t.TempDir()
			out := filepath.Join(dir, "snap.tar")
			p := tg.start(t, nil, "snapshot", "export", snapID, "-o", out)
			waitFor(t, "the first archive bytes", func() bool {
				for _, n := range dirNames(t, dir) {
					if st, err := os.Stat(filepath.Join(dir, n)); err == nil && st.Size() > 0 {
						return true
					}
				}
				return false
			})
			return p, func(t *testing.T) {
				if names := dirNames(t, dir); len(names) > 0 {
					t.Errorf("an interrupted export left %v in %s", names, dir)
				}
				tg.waitFailedRecord(t, seq, "snapshot.export")
			}
		},
	}, {
		// attach follows a process it did not start: a signal stops the
		// following, not the process.
		name: "attach",
		start: func(t *testing.T, tg *target, sig syscall.Signal) (*proc, func(*testing.T)) {
			id := strings.TrimSpace(tg.must(t, "exec", "-d", "--", "sh", "-c", "echo ready; exec sleep 300"))
			p := tg.start(t, nil, "attach", id)
			if l := p.line(t); l != "ready" {
				t.Fatalf("attach printed %q first, want ready", l)
			}
			return p, func(t *testing.T) {
				defer tg.must(t, "kill", id, "--signal", "KILL")
				if ps := tg.must(t, "ps"); !strings.Contains(ps, id+"  running") {
					t.Errorf("after attach stopped on a signal, ps says:\n%s\nwant %s running", ps, id)
				}
				if !strings.Contains(p.stderr.String(), "stopped following "+id) {
					t.Errorf("attach's stderr %q does not say it stopped following %s", p.stderr.String(), id)
				}
			}
		},
	}, {
		// exec forwards the signal; the command traps it and exits 7,
		// which is agentctl's exit code.
		name:     "exec forwards",
		wantCode: 7,
		start: func(t *testing.T, tg *target, sig syscall.Signal) (*proc, func(*testing.T)) {
			p := tg.start(t, nil, "exec", "--", "sh", "-c", "trap 'echo trapped; exit 7' INT TERM; echo ready; while :; do sleep 0.05; done")
			p.line(t)
			return p, func(t *testing.T) {
				if l := p.line(t); l != "trapped" {
					t.Errorf("after ready, exec printed %q, want trapped", l)
				}
			}
		},
	}}
}

// signalled runs lc, sends it sig and checks how it ended.
func (tg *target) signalled(t *testing.T, lc longCase, sig syscall.Signal) {
	p, check := lc.start(t, tg, sig)
	sent := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 15*time.Second)
	took := time.Since(sent)
	want := lc.wantCode
	if want == 0 {
		want = 128 + int(sig)
	}
	if code != want || took > promptly {
		t.Errorf("agentctl %s: exit %d %s after %s, want %d within %s\nstderr:\n%s",
			strings.Join(p.args, " "), code, took.Round(time.Millisecond), unix.SignalName(sig), want, promptly, p.stderr.String())
	}
	t.Logf("exit %d %s after %s", code, took.Round(time.Millisecond), unix.SignalName(sig))
	if check != nil {
		check(t)
	}
}

// target is a daemon, reached directly or through a hub.
type target struct {
	args      []string // the target flags
	ws, state string   // the daemon's workspace and state directory
	env       []string // agentctl's environment
}

// baseEnv is the environment for agentctl and agentd: this one without
// anything that names a target, with HOME in dir.
func baseEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTD_") && !strings.HasPrefix(kv, "AGENTCTL_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "SHELL=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+dir, "SHELL=/bin/sh")
}

// startDaemon starts agentd with args as a real process, stopped with
// SIGTERM when the test ends.
func startDaemon(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(agentdBin, args...)
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("agentd %s log:\n%s", args[0], logs.String())
		}
	})
}

// startLocal serves a daemon on a unix socket (`agentd serve`).
func startLocal(t *testing.T) *target {
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "actl") // a short path: sockets have a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agentd.sock")
	tg := &target{args: []string{"--addr", "unix://" + sock}, ws: filepath.Join(dir, "ws"), state: filepath.Join(dir, "state"), env: baseEnv(dir)}
	if err := os.Mkdir(tg.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, append(baseEnv(dir), "AGENTD_STATE_DIR="+tg.state), "serve", "--listen", "unix://"+sock, "--workspace", tg.ws)
	waitFor(t, "the daemon's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	return tg
}

// startViaHub serves a hub, pairs a daemon with it (`agentd pair`) and runs
// it (`agentd run`); calls go through the hub.
func startViaHub(t *testing.T) *target {
	h := hubtest.Start(t, hubtest.Options{})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := &target{ws: filepath.Join(dir, "ws"), state: filepath.Join(dir, "state"), env: baseEnv(dir)}
	if err := os.Mkdir(tg.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	hubArgs := []string{"--hub", h.URL, "--token-file", tokenFile}
	tg.args = hubArgs
	code := strings.TrimSpace(tg.must(t, "admin", "pair-code", "create"))
	denv := append(baseEnv(dir), "AGENTD_STATE_DIR="+tg.state, "AGENTD_CONFIG_DIR="+filepath.Join(dir, "config"))
	pair := exec.Command(agentdBin, "pair", "--hub", h.URL, "--code", code)
	pair.Env = denv
	out, err := pair.Output()
	if err != nil {
		t.Fatalf("agentd pair: %v", err)
	}
	id := strings.TrimSpace(string(out))
	startDaemon(t, denv, "run", "--workspace", tg.ws)

	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+h.Token)
	waitFor(t, "the machine to come online", func() bool {
		resp, err := hubv1.NewAdminServiceClient(cc).ListMachines(ctx, &hubv1.ListMachinesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.GetMachines() {
			if m.GetId() == id {
				return m.GetStatus() == hubv1.MachineStatus_MACHINE_STATUS_ONLINE
			}
		}
		return false
	})
	tg.args = append(hubArgs, "--machine", id)
	return tg
}

// prepare makes what the cases need in the workspace: a tree for grep with
// some 500 MB of output at -C 50, and a snapshot of a 1 GiB sparse file
// (its archive streams for a while; the store keeps it compressed to
// almost nothing). It returns the snapshot's id.
func (tg *target) prepare(t *testing.T) string {
	t.Helper()
	line := strings.Repeat("n", 470) + " needle\n"
	for i := range 100 {
		d := filepath.Join(tg.ws, "tree", fmt.Sprint(i%10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), []byte(strings.Repeat(line, 100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := filepath.Join(tg.ws, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(big, "zeros"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return strings.TrimSpace(tg.must(t, "snapshot", "create", big, "--label", "big"))
}

// must runs agentctl to completion and returns its stdout; it fails the
// test unless agentctl exits 0.
func (tg *target) must(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(agentctlBin, append(append([]string{}, tg.args...), args...)...)
	cmd.Env = tg.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agentctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// stdinPipe is a pipe for agentctl's stdin whose write end stays open
// until the test ends: a producer that has not finished.
type stdinPipe struct{ r, w *os.File }

// pipeIn returns a stdinPipe holding data.
func (tg *target) pipeIn(t *testing.T, data []byte) *stdinPipe {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if _, err := w.Write(data); err != nil { // less than a pipe holds
		t.Fatal(err)
	}
	return &stdinPipe{r, w}
}

// proc is a running agentctl.
type proc struct {
	cmd    *exec.Cmd
	args   []string
	out    *bufio.Reader
	stderr *syncBuffer
	exited chan struct{}
	code   int
}

// start starts agentctl with stdin (nil: none) and args; with stdin, it
// returns once agentctl has read what the pipe held.
func (tg *target) start(t *testing.T, stdin *stdinPipe, args ...string) *proc {
	t.Helper()
	p := &proc{args: args, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(agentctlBin, append(append([]string{}, tg.args...), args...)...)
	p.cmd.Env = tg.env
	if stdin != nil {
		p.cmd.Stdin = stdin.r
	}
	p.cmd.Stderr = p.stderr
	// A pipe of our own rather than StdoutPipe, which Wait closes: what
	// agentctl printed stays readable after it exited.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	p.cmd.Stdout = w
	p.out = bufio.NewReader(r)
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if err != nil && p.code < 0 {
			p.code = -1
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	if stdin != nil {
		waitFor(t, "agentctl to read its stdin", func() bool {
			n, err := unix.IoctlGetInt(int(stdin.w.Fd()), unix.TIOCINQ) // FIONREAD: bytes not read yet
			return err == nil && n == 0
		})
	}
	return p
}

// line reads the next line agentctl printed.
func (p *proc) line(t *testing.T) string {
	t.Helper()
	type lineErr struct {
		s   string
		err error
	}
	c := make(chan lineErr, 1)
	go func() {
		s, err := p.out.ReadString('\n')
		c <- lineErr{s, err}
	}()
	select {
	case l := <-c:
		if l.err != nil {
			t.Fatalf("agentctl %s: reading stdout: %v\nstderr:\n%s", strings.Join(p.args, " "), l.err, p.stderr.String())
		}
		return strings.TrimSuffix(l.s, "\n")
	case <-time.After(20 * time.Second):
		t.Fatalf("agentctl %s printed no line in 20s\nstderr:\n%s", strings.Join(p.args, " "), p.stderr.String())
	}
	return ""
}

// wait waits up to d for agentctl to exit and returns its exit code (-1:
// killed by a signal).
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(d):
		t.Fatalf("agentctl %s still running %s after the signal\nstderr:\n%s", strings.Join(p.args, " "), d, p.stderr.String())
	}
	return 0
}

// lastSeq is the sequence number of the daemon's newest audit record.
func (tg *target) lastSeq(t *testing.T) uint64 {
	t.Helper()
	var seq uint64
	_ = activity.Tail(t.Context(), tg.state, false, 0, func(r activity.Record) error {
		seq = max(seq, r.Seq)
		return nil
	})
	return seq
}

// waitFailedRecord waits for the daemon to record an operation of kind,
// after seq, that ended in an error: the daemon saw the call cancelled.
func (tg *target) waitFailedRecord(t *testing.T, seq uint64, kind string) {
	t.Helper()
	waitFor(t, "the daemon to record the cancelled "+kind, func() bool {
		found := false
		_ = activity.Tail(t.Context(), tg.state, false, 0, func(r activity.Record) error {
			found = found || (r.Seq > seq && r.Kind == kind && r.Error != "")
			return nil
		})
		return found
	})
}

// dirNames lists dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// waitFor polls cond until it holds, for at most 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
