package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/wire"
)

// chunkSize bounds the data of one Output event and of one read from a
// process's output.
const chunkSize = wire.ChunkSize

// A stream's reader starts with minReadSize bytes a read, which is all a
// quiet command needs, and doubles it up to maxReadSize while reads come
// back full.
const (
	minReadSize = 8 << 10
	maxReadSize = 128 << 10
)

// Process is a command started by a Manager: running, or finished and
// lingering. Its methods are safe for concurrent use.
type Process struct {
	m    *Manager
	log  *zap.Logger
	id   string
	seq  uint64 // start order in the Manager
	plan *plan
	cmd  *exec.Cmd
	pid  int
	//lint:ignore U1000 used by the Windows implementation (an empty struct on unix)
	grp   procGroup // the platform's state for the process group
	start time.Time
	// cgStart are the cgroup's counters before the start, for the
	// reason of the exit.
	cgStart cgroupCounters
	kinds   []Stream // the stream of each output index

	outputs    []*os.File  // read ends of the output streams (the pty master with a pty)
	pty        *os.File    // the pty master, nil without a pty
	leaderGone atomic.Bool // the leader has exited: output reads time out when idle
	readers    sync.WaitGroup
	feeder     sync.WaitGroup
	done       chan struct{} // closed when the process has finished

	// stdin is where Input writes: the write end of the stdin pipe, or the
	// pty master; nil when stdin is /dev/null. inSem is held while writing
	// to it, which keeps writes whole and in order; inClosed is guarded by
	// inSem.
	stdin        *os.File
	acceptsInput bool
	inSem        chan struct{}
	inClosed     bool
	stdinOpen    atomic.Bool

	mu             sync.Mutex
	changed        chan struct{} // closed and replaced on every change (see broadcastLocked)
	streams        []*retention
	appendSeq      uint64
	subs           map[*Subscription]struct{}
	readersBlocked int  // readers waiting for a slow subscriber
	unthrottled    bool // the Manager is closing: subscribers hold nothing back
	stopping       bool // TERM or KILL was sent: kill the group's rest when the leader exits
	timedOut       bool
	graceTimer     *time.Timer
	killAt         time.Time
	timeoutTimer   *time.Timer
	exit           *ExitInfo // set when finished
}

func (m *Manager) start(ctx context.Context, spec Spec, attachCtx context.Context) (*Process, *Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, errs.Wrap(errs.KindOf(err), err, "start")
	}
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.starting.Add(1) // Close keeps the shared files open until Done
	}
	m.mu.Unlock()
	if closed {
		return nil, nil, errClosed
	}
	defer m.starting.Done()
	pl, err := m.prepare(spec)
	if err != nil {
		return nil, nil, err
	}
	p := &Process{
		m:       m,
		plan:    pl,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		subs:    make(map[*Subscription]struct{}),
		inSem:   make(chan struct{}, 1),
	}
	cmd := &exec.Cmd{Path: pl.path, Args: pl.argv, Env: pl.env, Dir: pl.dir}
	var childEnds, ourEnds []*os.File
	closeAll := func(files []*os.File) {
		for _, f := range files {
			f.Close()
		}
	}
	if spec.Pty != nil {
		master, tty, err := openPty(spec.Pty)
		if err != nil {
			return nil, nil, errs.Wrap(errs.Exhausted, err, "allocate a pty")
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = sysProcAttr(pl, true)
		childEnds = append(childEnds, tty)
		ourEnds = append(ourEnds, master)
		p.pty, p.stdin, p.acceptsInput = master, master, true
		p.outputs = []*os.File{master}
		p.kinds = []Stream{StreamPty}
	} else {
		cmd.SysProcAttr = sysProcAttr(pl, false)
		for range 2 {
			r, w, err := os.Pipe()
			if err != nil {
				closeAll(childEnds)
				closeAll(ourEnds)
				return nil, nil, errs.Wrap(errs.Exhausted, err, "create output pipe")
			}
			p.outputs = append(p.outputs, r)
			ourEnds = append(ourEnds, r)
			childEnds = append(childEnds, w)
		}
		cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[1]
		if spec.OpenStdin || len(spec.Stdin) > 0 {
			r, w, err := os.Pipe()
			if err != nil {
				closeAll(childEnds)
				closeAll(ourEnds)
				return nil, nil, errs.Wrap(errs.Exhausted, err, "create stdin pipe")
			}
			cmd.Stdin = r
			childEnds = append(childEnds, r)
			ourEnds = append(ourEnds, w)
			p.stdin, p.acceptsInput = w, spec.OpenStdin
		}
		if cmd.Stdin == nil && m.devNull != nil {
			cmd.Stdin = m.devNull // else os/exec opens /dev/null each time
		}
		p.kinds = []Stream{StreamStdout, StreamStderr}
	}
	for range p.kinds {
		p.streams = append(p.streams, newRetention(pl.headCap, pl.tailCap))
	}

	cgStart := readCgroupCounters()
	err = cmd.Start()
	closeAll(childEnds)
	if err != nil {
		closeAll(ourEnds)
		if derr := checkDir(pl.dir); derr != nil {
			return nil, nil, derr
		}
		return nil, nil, startError(pl.argv[0], err)
	}
	p.cmd = cmd
	p.pid = cmd.Process.Pid
	p.start = m.opts.Now()
	p.cgStart = cgStart
	if adj := m.opts.ChildOOMScoreAdj; adj != 0 {
		if err := m.setOOMScoreAdj(p.pid, adj); err != nil {
			m.log.Warn("cannot raise the command's OOM score", zap.Int("pid", p.pid), zap.Error(err))
		}
	}
	if err := p.startGroup(); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		closeAll(ourEnds)
		return nil, nil, errs.Wrap(errs.KindOf(err), err, "set up the process group of %s", pl.argv[0])
	}

	var sub *Subscription
	if attachCtx != nil {
		// Subscribed before any output is read: nothing can be lost.
		sub = p.subscribe(attachCtx, Offsets{})
	}
	if !m.register(p) {
		p.mu.Lock()
		_ = p.signalLocked(syscall.SIGKILL)
		p.mu.Unlock()
		_ = cmd.Wait()
		p.releaseGroup()
		closeAll(ourEnds)
		if sub != nil {
			sub.Close()
		}
		return nil, nil, errClosed
	}
	p.log = m.log.With(zap.String("id", p.id), zap.Int("pid", p.pid))
	p.stdinOpen.Store(p.acceptsInput)
	if len(spec.Stdin) > 0 {
		p.inSem <- struct{}{} // taken before Start returns: Input calls queue behind
		p.feeder.Add(1)
		go p.feed(spec.Stdin, !spec.OpenStdin && spec.Pty == nil)
	}
	for i, f := range p.outputs {
		p.readers.Add(1)
		go p.read(i, f)
	}
	if spec.Timeout > 0 {
		p.mu.Lock()
		p.timeoutTimer = time.AfterFunc(spec.Timeout, p.timeout)
		p.mu.Unlock()
	}
	go p.wait()
	p.log.Debug("started", zap.Strings("argv", pl.argv), zap.String("dir", pl.dir), zap.String("tag", spec.Tag))
	return p, sub, nil
}

func startError(prog string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOEXEC):
		return errs.New(errs.Invalid, "cannot run %s: not an executable format (a script needs a #! line)", prog)
	case errors.Is(err, syscall.E2BIG):
		return errs.New(errs.Invalid, "cannot run %s: argument list and environment too long", prog)
	case errors.Is(err, syscall.ENOENT):
		return errs.New(errs.NotFound, "cannot run %s: it or its interpreter does not exist", prog)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return errs.New(errs.Permission, "cannot run %s: permission denied", prog)
	}
	return errs.Wrap(errs.KindOf(err), err, "start %s", prog)
}

// ID returns the process's id in its Manager ("p-" and 10 hex digits).
func (p *Process) ID() string { return p.id }

// PID returns the OS process id of the process's leader.
func (p *Process) PID() int { return p.pid }

// Done is closed when the process has finished: its leader exited and its
// output was read to the end.
func (p *Process) Done() <-chan struct{} { return p.done }

// Info describes the process.
func (p *Process) Info() Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	info := Info{
		ID:        p.id,
		PID:       p.pid,
		Argv:      slices.Clone(p.plan.argv),
		Command:   p.plan.spec.Command,
		Dir:       p.plan.dir,
		Tag:       p.plan.spec.Tag,
		Pty:       p.pty != nil,
		StdinOpen: p.stdinOpen.Load(),
		StartTime: p.start,
		State:     StateRunning,
	}
	if p.exit != nil {
		info.State = StateExited
		info.Exit = p.exitCopyLocked()
	}
	return info
}

func (p *Process) exitCopyLocked() *ExitInfo {
	e := *p.exit
	e.Streams = slices.Clone(e.Streams)
	return &e
}

func (p *Process) endTime() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		return time.Time{}, false
	}
	return p.exit.EndTime, true
}

// Wait waits until the process has finished, or ctx is done.
func (p *Process) Wait(ctx context.Context) (ExitInfo, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return ExitInfo{}, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.exitCopyLocked(), nil
}

// Signal sends sig to the process's whole process group. SIGTERM is
// followed by SIGKILL after grace (zero: the Spec's grace) if anything in
// the group is still alive; SIGKILL is immediate. Either also makes sure
// that whatever is left of the group dies when the leader exits. Other
// signals are delivered as they are. A process whose leader has exited is
// still signalled while members of its group live (what the leader left
// running in the background, on unix); once none does, signalling it is
// an error of kind Precondition.
func (p *Process) Signal(sig syscall.Signal, grace time.Duration) error {
	if sig <= 0 || SignalName(sig) == "" {
		return errs.New(errs.Invalid, "signal %d is not a valid signal", int(sig))
	}
	if grace < 0 {
		return errs.New(errs.Invalid, "grace %v is negative", grace)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit != nil && !p.groupAliveLocked() {
		return errs.New(errs.Precondition, "process %s has already exited", p.id)
	}
	switch sig {
	case syscall.SIGTERM:
		return p.terminateLocked(orDefault(grace, p.plan.grace), false)
	case syscall.SIGKILL:
		p.stopping = true
		return p.signalLocked(syscall.SIGKILL)
	}
	return p.signalLocked(sig)
}

// terminateLocked sends SIGTERM (and SIGCONT, so that a stopped group can
// act on it) to the group and arms SIGKILL for after grace.
func (p *Process) terminateLocked(grace time.Duration, timedOut bool) error {
	p.stopping = true
	p.timedOut = p.timedOut || timedOut
	err := p.signalLocked(syscall.SIGTERM)
	p.continueLocked()
	killAt := time.Now().Add(grace)
	switch {
	case p.graceTimer == nil:
		p.graceTimer = time.AfterFunc(grace, p.graceExpired)
		p.killAt = killAt
	case killAt.Before(p.killAt):
		p.graceTimer.Reset(grace)
		p.killAt = killAt
	}
	return err
}

func (p *Process) graceExpired() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit != nil && !p.groupAliveLocked() {
		return
	}
	// A group with no member left answers ESRCH: nothing to do.
	_ = p.signalLocked(syscall.SIGKILL)
}

// timeout stops the process's group at its deadline, whether or not the
// leader has exited: a leader that exits at once (a fork bomb's) does not
// let its group outlive the timeout. The process's exit was recorded when
// its leader exited; stopping what it left behind is logged.
func (p *Process) timeout() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit != nil {
		if !p.groupAliveLocked() {
			return
		}
		p.log.Info("timed out after its leader exited: stopping what is left of its group",
			zap.Duration("timeout", p.plan.spec.Timeout))
	} else {
		p.log.Debug("timed out", zap.Duration("timeout", p.plan.spec.Timeout))
	}
	_ = p.terminateLocked(p.plan.grace, true)
}

// shutdown starts stopping the process for Manager.Close. What a finished
// process left running in its group is killed at once (Close does not wait
// for it).
func (p *Process) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unthrottled = true
	p.broadcastLocked()
	if p.exit == nil {
		_ = p.terminateLocked(p.plan.grace, false)
		return
	}
	if p.groupAliveLocked() {
		_ = p.signalLocked(syscall.SIGKILL)
	}
	p.stopTimersLocked()
}

// stopTimersLocked stops the timeout and the grace period's timers.
func (p *Process) stopTimersLocked() {
	if p.timeoutTimer != nil {
		p.timeoutTimer.Stop()
	}
	if p.graceTimer != nil {
		p.graceTimer.Stop()
	}
}

// Input writes data to the process's stdin, in order with other Input
// calls; it returns when all of data is written or ctx is done (then part
// of data may have been written). A process started without OpenStdin and
// without a pty takes no input: that is an error of kind Precondition, as
// is input after CloseInput or after the process exited.
func (p *Process) Input(ctx context.Context, data []byte) error {
	if !p.acceptsInput {
		return errs.New(errs.Precondition, "process %s was started without open stdin", p.id)
	}
	if err := p.lockInput(ctx); err != nil {
		return err
	}
	defer p.unlockInput()
	if p.inClosed {
		return errs.New(errs.Precondition, "stdin of process %s is already closed", p.id)
	}
	if len(data) == 0 {
		return nil
	}
	return p.inputError(writeCtx(ctx, p.stdin, data))
}

// CloseInput closes the process's stdin after the input written so far,
// so that the process reads end of file. With a pty it writes the
// terminal's end-of-file character (Ctrl-D) instead. Closing it twice is
// not an error.
func (p *Process) CloseInput(ctx context.Context) error {
	if !p.acceptsInput {
		return errs.New(errs.Precondition, "process %s was started without open stdin", p.id)
	}
	if err := p.lockInput(ctx); err != nil {
		return err
	}
	defer p.unlockInput()
	return p.inputError(p.closeInputHeld(ctx))
}

func (p *Process) lockInput(ctx context.Context) error {
	select {
	case p.inSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Process) unlockInput() { <-p.inSem }

// closeInputHeld closes stdin; the caller holds inSem.
func (p *Process) closeInputHeld(ctx context.Context) error {
	if p.inClosed {
		return nil
	}
	p.inClosed = true
	p.stdinOpen.Store(false)
	if p.pty != nil {
		return writeCtx(ctx, p.pty, []byte{4})
	}
	return p.stdin.Close()
}

func (p *Process) inputError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, syscall.EPIPE):
		return errs.New(errs.Precondition, "process %s no longer reads its stdin", p.id)
	case errors.Is(err, os.ErrClosed), errors.Is(err, syscall.EIO):
		return errs.New(errs.Precondition, "process %s has exited", p.id)
	}
	return errs.Wrap(errs.KindOf(err), err, "write to stdin of process %s", p.id)
}

// writeCtx writes data to f, giving up when ctx is done.
func writeCtx(ctx context.Context, f *os.File, data []byte) error {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = f.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	_, err := f.Write(data)
	if !stop() {
		<-fired
		_ = f.SetWriteDeadline(time.Time{})
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			return ctx.Err()
		}
	}
	return err
}

// feed writes the Spec's stdin bytes, then closes stdin if asked to. It
// runs holding inSem, which start took for it.
func (p *Process) feed(data []byte, closeAfter bool) {
	defer p.feeder.Done()
	defer p.unlockInput()
	if _, err := p.stdin.Write(data); err != nil {
		p.log.Debug("stdin not fully written", zap.Error(err))
	}
	if closeAfter {
		_ = p.closeInputHeld(context.Background())
	}
}

// Resize changes the window size of the process's pty. A process without a
// pty cannot be resized: an error of kind Precondition.
func (p *Process) Resize(size PtySize) error {
	if p.pty == nil {
		return errs.New(errs.Precondition, "process %s has no pty: only a process started with a pty can be resized", p.id)
	}
	if err := setPtySize(p.pty, size); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return errs.New(errs.Precondition, "process %s has exited", p.id)
		}
		return errs.Wrap(errs.KindOf(err), err, "resize the pty of process %s", p.id)
	}
	return nil
}

// read copies one output stream of the process into its retention buffer
// until end of file, or until the stream stays idle for DrainTimeout after
// the leader exited.
func (p *Process) read(i int, f *os.File) {
	defer p.readers.Done()
	buf := make([]byte, minReadSize)
	for {
		if p.leaderGone.Load() {
			_ = f.SetReadDeadline(time.Now().Add(p.m.opts.DrainTimeout))
		}
		n, err := f.Read(buf)
		if n > 0 {
			p.write(i, buf[:n])
		}
		if n == len(buf) && len(buf) < maxReadSize {
			// A busy stream: read more per system call (a pipe holds 64 KiB).
			buf = make([]byte, 2*len(buf))
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF), errors.Is(err, syscall.EIO): // EIO: the pty's last slave closed
		case errors.Is(err, os.ErrDeadlineExceeded):
			p.log.Info("process exited but something it started keeps its output open; stopped reading it",
				zap.Stringer("stream", p.kinds[i]))
		default:
			p.log.Warn("read output", zap.Stringer("stream", p.kinds[i]), zap.Error(err))
		}
		return
	}
}

// write appends data to the retention buffer of stream i, holding the
// reader back while a live subscriber would otherwise lose bytes.
//
// This is what makes live streaming lossless without unbounded memory:
// subscribers do not get queues of their own, they read the shared
// retention buffer by offset. When appending would push bytes out of the
// tail that a live (attached, not yet demoted) subscriber has not read
// yet, the reader waits for the subscriber instead; meanwhile the child
// blocks on its full pipe. With no subscriber attached the reader never
// waits and the middle of the output is dropped. A subscriber that reads
// nothing at all for StallTimeout is demoted: the reader stops waiting for
// it, and it gets a Gap event where bytes went missing. It is promoted back
// once it has caught up.
func (p *Process) write(i int, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.streams[i]
	var stalled time.Time
	for len(data) > 0 {
		n := int64(len(data))
		need, waitFor := p.slowestLocked(i)
		if waitFor && !p.unthrottled {
			n = min(n, r.room(need))
		}
		if n > 0 {
			stalled = time.Time{}
			p.appendSeq++
			r.write(data[:n], p.appendSeq)
			data = data[n:]
			p.broadcastLocked()
			continue
		}
		if stalled.IsZero() {
			stalled = time.Now()
		}
		wait := p.m.opts.StallTimeout - time.Since(stalled)
		if wait <= 0 {
			p.demoteLocked(i, need)
			stalled = time.Time{}
			continue
		}
		ch := p.changed
		p.readersBlocked++
		p.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		p.mu.Lock()
		p.readersBlocked--
	}
}

// slowestLocked returns the lowest offset in stream i that a live
// subscriber still has to read, and whether there is such a subscriber.
func (p *Process) slowestLocked(i int) (need int64, ok bool) {
	r := p.streams[i]
	for s := range p.subs {
		if s.lossy {
			continue
		}
		pos := s.pos[i]
		if resume, gap := r.gap(pos); gap {
			pos = resume
		}
		if !ok || pos < need {
			need, ok = pos, true
		}
	}
	return need, ok
}

func (p *Process) demoteLocked(i int, need int64) {
	r := p.streams[i]
	for s := range p.subs {
		pos := s.pos[i]
		if resume, gap := r.gap(pos); gap {
			pos = resume
		}
		if !s.lossy && pos == need {
			s.lossy = true
			p.log.Warn("a subscriber read nothing for too long; no longer holding the output back for it",
				zap.Stringer("stream", p.kinds[i]), zap.Duration("stall", p.m.opts.StallTimeout))
		}
	}
}

// broadcastLocked wakes everyone waiting for a change: subscribers waiting
// for output, readers waiting for subscribers.
func (p *Process) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait owns the process's life after start: it waits for the leader to
// exit, kills what is left of the group if the process was being stopped,
// reaps the leader, waits for the output to be read, and records the exit.
func (p *Process) wait() {
	defer p.m.wg.Done()
	peeked := waitLeader(p.pid) == nil
	if peeked {
		p.leaderExited()
	}
	if err := p.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			p.log.Warn("wait", zap.Error(err))
		}
	}
	if !peeked {
		p.leaderExited()
	}
	end := p.m.opts.Now()

	p.leaderGone.Store(true)
	deadline := time.Now().Add(p.m.opts.DrainTimeout)
	for _, f := range p.outputs {
		_ = f.SetReadDeadline(deadline)
	}
	p.readers.Wait()
	if p.stdin != nil && p.stdin != p.pty {
		p.stdin.Close()
	}
	for _, f := range p.outputs {
		f.Close()
	}
	p.feeder.Wait()
	p.stdinOpen.Store(false)

	p.mu.Lock()
	p.exit = p.exitInfoLocked(end)
	if !p.groupAliveLocked() {
		// Else the timers stay armed: the timeout and the end of a grace
		// period reach what the leader left in its group.
		p.stopTimersLocked()
	}
	p.broadcastLocked()
	exit := *p.exit
	p.mu.Unlock()
	p.releaseGroup()
	close(p.done)
	p.log.Debug("exited", zap.Int("code", exit.Code), zap.String("signal", exit.Signal),
		zap.Bool("timed_out", exit.TimedOut), zap.Duration("duration", exit.Duration))
}

// leaderExited is called once the leader has exited (before it is reaped
// where the platform allows): if the process was being stopped, the rest of
// its group is killed so that no orphan survives a timeout or a kill.
func (p *Process) leaderExited() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		_ = p.signalLocked(syscall.SIGKILL)
	}
}

func (p *Process) exitInfoLocked(end time.Time) *ExitInfo {
	e := &ExitInfo{
		Code:      -1,
		TimedOut:  p.timedOut,
		Duration:  end.Sub(p.start),
		StartTime: p.start,
		EndTime:   end,
	}
	for i, r := range p.streams {
		total, retained, omitted := r.stats()
		e.Streams = append(e.Streams, StreamStats{Stream: p.kinds[i], Total: total, Retained: retained, Omitted: omitted})
	}
	if p.cmd.ProcessState == nil {
		return e // not reaped by us: nothing known (logged by wait)
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			e.Signal = SignalName(ws.Signal())
			e.SignalNumber = int(ws.Signal())
		} else {
			e.Code = ws.ExitStatus()
		}
		var sig syscall.Signal
		if ws.Signaled() {
			sig = ws.Signal()
		}
		e.Reason = exitReason(p.cgStart, readCgroupCounters(), sig, p.stopping, cgroupLimits)
	}
	return e
}

// Excerpt returns what is retained of the first n and the last n bytes of
// stream s (the two do not overlap), and whether any byte of the stream is
// missing between or within them. It is meant for logs and audit records.
func (p *Process) Excerpt(s Stream, n int64) (head, tail []byte, cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.kinds, s)
	if i < 0 || n <= 0 {
		return nil, nil, false
	}
	r := p.streams[i]
	headEnd := min(n, r.total)
	tailStart := max(r.total-n, headEnd)
	head = r.copyRange(0, headEnd)
	tail = r.copyRange(tailStart, r.total)
	return head, tail, int64(len(head)+len(tail)) < r.total
}
