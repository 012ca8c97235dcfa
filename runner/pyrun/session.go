package pyrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/wire"
	"github.com/devdepot-ai/agentd/runner"
)

const (
	// chunkSize bounds one Output event.
	chunkSize = wire.ChunkSize
	// drainGrace is how long the output of a dead interpreter is read
	// after it died: pipes that a stray process (one that left the process
	// group) holds open never reach EOF.
	drainGrace = 500 * time.Millisecond
	// startTimeout bounds an interpreter's start, up to the driver's ready.
	startTimeout = 30 * time.Second
	// writeTimeout bounds handing a request to the driver.
	writeTimeout = 30 * time.Second
	// stderrKeep is how much of a failed start's output is kept for the error.
	stderrKeep = 4 << 10
)

// aLongTimeAgo is a deadline in the past: it wakes a blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)

// session is one interpreter running the driver: a named session, or the
// interpreter of a one-off run. Its four goroutines (the waiter, the reader
// of the control pipe and one reader per output stream) are stopped and
// waited for by stop.
type session struct {
	name   string // "" for a one-off run
	log    *zap.Logger
	oomAdj int // Options.ChildOOMScoreAdj

	// Guarded by Manager.mu.
	busy     bool
	created  time.Time
	lastUsed time.Time
	runs     int64
	pid      int

	mu         sync.Mutex // guards the fields below
	cmd        *exec.Cmd
	killed     bool   // SIGKILL sent (or asked for before the start)
	reaped     bool   // the leader was reaped: its pid may be reused
	killReason string // why the daemon killed it, for the run in progress

	ctrlW, ctrlR *os.File      // requests to the driver; replies from it
	out, errs    *streamReader // the interpreter's stdout and stderr
	replies      chan reply    // from the control reader; closed when the pipe ends
	leaderExited chan struct{} // closed when the interpreter exited (not yet reaped)
	reap         chan struct{} // closed by stop: the waiter may reap the leader
	waited       chan struct{} // closed when the leader was reaped
	released     chan struct{} // closed by stop: the control reader gives up
	state        *os.ProcessState
	goroutines   sync.WaitGroup
	stopOnce     sync.Once

	outMu sync.Mutex // serialises the events of a run; guards sink
	sink  sink
}

// sink receives a session's events; nil discards them.
type sink interface{ send(Event) }

func newSession(name string, log *zap.Logger, now time.Time) *session {
	return &session{
		name:         name,
		log:          log,
		created:      now,
		lastUsed:     now,
		replies:      make(chan reply),
		leaderExited: make(chan struct{}),
		reap:         make(chan struct{}),
		waited:       make(chan struct{}),
		released:     make(chan struct{}),
	}
}

// launch starts python (the resolved path) in dir with env and waits for
// the driver to be ready. On error everything it started is stopped.
func (s *session) launch(ctx context.Context, python, dir string, env []string) (err error) {
	if err := sessionsSupported(); err != nil {
		return err
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	cmdR, cmdW, err := pipe()
	if err != nil {
		closeAll()
		return fmt.Errorf("python pipes: %w", err)
	}
	evR, evW, err := pipe()
	if err != nil {
		closeAll()
		return fmt.Errorf("python pipes: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return fmt.Errorf("python pipes: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return fmt.Errorf("python pipes: %w", err)
	}

	growPipe(cmdW, 1<<20)
	growPipe(outW, 256<<10)
	growPipe(errW, 256<<10)

	cmd := exec.Command(python, "-c", bootstrap)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		closeAll()
		return errs.Wrap(errs.Precondition, err, "start %s", python)
	}
	if s.oomAdj != 0 {
		if err := runner.SetOOMScoreAdj(cmd.Process.Pid, s.oomAdj); err != nil {
			s.log.Warn("cannot raise the interpreter's OOM score", zap.Error(err))
		}
	}
	for _, f := range []*os.File{cmdR, evW, outW, errW} {
		f.Close()
	}

	s.mu.Lock()
	s.cmd = cmd
	killed := s.killed
	s.mu.Unlock()
	s.ctrlW, s.ctrlR = cmdW, evR
	s.out = newStreamReader(s, Stdout, outR)
	s.errs = newStreamReader(s, Stderr, errR)
	startup := &startupSink{}
	s.setSink(startup)
	s.goroutines.Add(4)
	go s.wait(cmd)
	go s.readControl()
	go s.out.loop()
	go s.errs.loop()
	if killed {
		s.kill("")
	}

	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	frame := appendFrame(make([]byte, 0, len(driverSource)+4), driverSource)
	if err := s.write(frame); err != nil {
		return s.startError(python, startup, err)
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case m, ok := <-s.replies:
		if !ok || m.Ev != "ready" {
			return s.startError(python, startup, errors.New("the driver did not start"))
		}
		s.setSink(nil)
		s.log.Debug("python interpreter ready", zap.Int("pid", m.Pid), zap.String("version", m.Version))
		return nil
	case <-s.leaderExited:
		return s.startError(python, startup, nil)
	case <-timer.C:
		return s.startError(python, startup, fmt.Errorf("no answer within %s", startTimeout))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startError describes a failed start, with the end of what the
// interpreter printed.
func (s *session) startError(python string, startup *startupSink, cause error) error {
	s.kill("")
	<-s.leaderExited
	s.drainOutput()
	<-s.waitReaped()
	msg := fmt.Sprintf("%s did not start", python)
	if st := s.state; st != nil && cause == nil {
		msg += " (" + st.String() + ")"
	}
	if cause != nil {
		msg += ": " + cause.Error()
	}
	if out := strings.TrimSpace(startup.String()); out != "" {
		msg += ": " + lastLines(out, 3)
	}
	if s.isKilledByDaemon() && cause == nil {
		return errs.New(errs.Canceled, "python session %q was closed while it started", s.name)
	}
	return errs.New(errs.Unavailable, "%s", msg)
}

func (s *session) isKilledByDaemon() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed && s.killReason != ""
}

// write hands a frame to the driver.
func (s *session) write(frame []byte) error {
	if err := s.ctrlW.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	_, err := s.ctrlW.Write(frame)
	return err
}

// interrupt sends SIGINT to the interpreter (not its group: programs the
// code started in earlier runs keep running).
func (s *session) interrupt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && !s.reaped {
		interruptLeader(s.cmd.Process)
	}
}

// kill sends SIGKILL to the interpreter's whole process group. reason, when
// not empty, is reported to the run in progress.
func (s *session) kill(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason != "" && s.killReason == "" {
		s.killReason = reason
	}
	s.killed = true
	if s.cmd != nil && !s.reaped {
		killGroup(s.cmd.Process)
	}
}

// dead reports whether the interpreter has exited.
func (s *session) dead() bool {
	select {
	case <-s.leaderExited:
		return true
	default:
		return false
	}
}

// stop kills the interpreter and its process group, reads what is left of
// its output (for drainGrace at most), reaps it and waits for the
// session's goroutines. Safe to call more than once.
func (s *session) stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		started := s.cmd != nil
		s.mu.Unlock()
		if !started {
			return
		}
		s.kill("")
		<-s.leaderExited
		s.drainOutput()
		s.drainControl(nil)
		<-s.waitReaped()
		close(s.released)
		s.goroutines.Wait()
		s.ctrlW.Close()
		s.ctrlR.Close()
		s.out.f.Close()
		s.errs.f.Close()
	})
}

// drainOutput lets the stream readers read to EOF (for drainGrace at most)
// and waits for them. The interpreter must be dead.
func (s *session) drainOutput() {
	deadline := time.Now().Add(drainGrace)
	for _, r := range []*streamReader{s.out, s.errs} {
		r.finish(deadline)
	}
	<-s.out.done
	<-s.errs.done
}

// drainControl passes the replies the driver sent before it died to fn (nil:
// drop them), until the control pipe ends or drainGrace passes.
func (s *session) drainControl(fn func(reply)) {
	_ = s.ctrlR.SetReadDeadline(time.Now().Add(drainGrace))
	for m := range s.replies {
		if fn != nil {
			fn(m)
		}
	}
}

// waitReaped lets the waiter reap the leader and returns a channel closed
// once it has. Nothing signals the group after this.
func (s *session) waitReaped() <-chan struct{} {
	s.mu.Lock()
	if !s.reaped {
		s.reaped = true
		close(s.reap)
	}
	s.mu.Unlock()
	return s.waited
}

// wait watches the interpreter: it notices its exit without reaping it, so
// that its process group can still be killed safely, and reaps it when
// stop allows.
func (s *session) wait(cmd *exec.Cmd) {
	defer s.goroutines.Done()
	defer close(s.waited)
	if err := waitLeader(cmd.Process.Pid); errors.Is(err, errors.ErrUnsupported) {
		_ = cmd.Wait()
		s.state = cmd.ProcessState
		close(s.leaderExited)
		<-s.reap
		return
	}
	close(s.leaderExited)
	<-s.reap
	_ = cmd.Wait()
	s.state = cmd.ProcessState
}

// readControl decodes the driver's replies into s.replies.
func (s *session) readControl() {
	defer s.goroutines.Done()
	defer close(s.replies)
	br := bufio.NewReaderSize(s.ctrlR, 64<<10)
	for {
		m, err := readReply(br)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				s.log.Warn("python driver: control pipe", zap.Error(err))
			}
			return
		}
		select {
		case s.replies <- m:
		case <-s.released:
			return
		}
	}
}

// setSink directs the session's events to k (nil: dropped).
func (s *session) setSink(k sink) {
	s.outMu.Lock()
	s.sink = k
	s.outMu.Unlock()
}

// emit sends ev to the current sink.
func (s *session) emit(ev Event) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.sink != nil {
		s.sink.send(ev)
	}
}

// syncOutput returns once every byte written to stdout and stderr before
// now has been passed to the sink.
func (s *session) syncOutput() {
	s.out.sync()
	s.errs.sync()
}

// streamReader forwards one output pipe of the interpreter to the
// session's sink, in chunks of at most chunkSize bytes.
//
// sync (from the run) and finish (at the end) reach a reader blocked in a
// read by setting a deadline in the past or near future; the reader then
// looks at which of the two asked.
type streamReader struct {
	s         *session
	stream    Stream
	f         *os.File
	syncs     chan chan struct{}
	finishing chan struct{}
	finishMu  sync.Once
	done      chan struct{}
}

func newStreamReader(s *session, stream Stream, f *os.File) *streamReader {
	return &streamReader{
		s: s, stream: stream, f: f,
		syncs:     make(chan chan struct{}, 1),
		finishing: make(chan struct{}),
		done:      make(chan struct{}),
	}
}

func (r *streamReader) loop() {
	defer r.s.goroutines.Done()
	defer close(r.done)
	buf := make([]byte, chunkSize)
	for {
		n, err := r.f.Read(buf)
		if n > 0 {
			r.s.emit(Output{Stream: r.stream, Data: bytes.Clone(buf[:n])})
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return // EOF: every writer is gone
		}
		select {
		case ack := <-r.syncs:
			_ = r.f.SetReadDeadline(time.Time{})
			r.forwardPending(buf)
			close(ack)
		case <-r.finishing:
			return
		}
	}
}

// forwardPending forwards the bytes that are in the pipe now.
func (r *streamReader) forwardPending(buf []byte) {
	n := pipeBuffered(r.f)
	for n > 0 {
		k, err := r.f.Read(buf[:min(n, len(buf))])
		if k > 0 {
			r.s.emit(Output{Stream: r.stream, Data: bytes.Clone(buf[:k])})
			n -= k
		}
		if err != nil {
			return
		}
	}
}

// sync returns once every byte that was in the pipe when it was called has
// been forwarded. The writer flushed before it told us, so that is all of
// it.
func (r *streamReader) sync() {
	ack := make(chan struct{})
	if err := r.f.SetReadDeadline(aLongTimeAgo); err != nil {
		return
	}
	select {
	case r.syncs <- ack:
	case <-r.done:
		return
	}
	select {
	case <-ack:
	case <-r.done:
	}
}

// finish makes the reader stop at EOF or at deadline, whichever is first.
func (r *streamReader) finish(deadline time.Time) {
	r.finishMu.Do(func() { close(r.finishing) })
	_ = r.f.SetReadDeadline(deadline)
}

// pipeBuffered returns how many bytes are waiting in the pipe f.
func pipeBuffered(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		if v, err := fdBuffered(int(fd)); err == nil {
			n = v
		}
	})
	return n
}

// startupSink keeps the first bytes an interpreter prints before its
// driver is ready, for the error when it fails to start.
type startupSink struct {
	bytes.Buffer
}

func (k *startupSink) send(ev Event) {
	if o, ok := ev.(Output); ok && k.Len() < stderrKeep {
		k.Write(o.Data[:min(len(o.Data), stderrKeep-k.Len())])
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
