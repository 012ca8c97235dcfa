package ctl

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/devdepot-ai/agentd/internal/wire"
)

// stopGrace is how long Main waits, after a signal stopped the command,
// for the command to return before it returns without it: a command
// blocked where no context reaches (a write to a pipe nobody reads) must
// not keep agentctl alive. A second signal ends the wait at once.
const stopGrace = time.Second

// interrupts routes the signals Main receives (IO.Signals). A signal stops
// the command: it cancels the command's context, so every call in flight
// is cancelled and the server stops its side too, and Main exits 128+N
// (130 for SIGINT, 143 for SIGTERM) once the command has cleaned up. A
// command that gives signals a meaning of its own — exec and sh forward
// them to the remote process — takes them (take) while it does.
type interrupts struct {
	cancel context.CancelFunc
	grace  time.Duration
	forced chan struct{} // closed when Main should stop waiting for the command
	force  func()        // closes forced, once
	quit   chan struct{} // closed by stop: the routing goroutine ends
	done   chan struct{} // closed when the routing goroutine has ended

	mu     sync.Mutex
	caught os.Signal      // the signal that stopped the command
	taken  chan os.Signal // while a command takes signals: where they go
	timer  *time.Timer    // the grace after caught
}

// watchInterrupts returns a context that a signal from sigs cancels, and
// the interrupts routing them; its stop must be called. A nil sigs
// delivers no signal.
func watchInterrupts(ctx context.Context, sigs <-chan os.Signal, grace time.Duration) (context.Context, *interrupts) {
	ctx, cancel := context.WithCancel(ctx)
	in := &interrupts{cancel: cancel, grace: grace, forced: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	var once sync.Once
	in.force = func() { once.Do(func() { close(in.forced) }) }
	go func() {
		defer close(in.done)
		for {
			select {
			case <-in.quit:
				return
			case s, ok := <-sigs:
				if !ok {
					return
				}
				in.deliver(s)
			}
		}
	}()
	return ctx, in
}

// deliver hands s to the command that takes signals, or stops the command.
func (in *interrupts) deliver(s os.Signal) {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.taken != nil:
		select {
		case in.taken <- s:
		default: // two are waiting already; like signal.Notify, drop it
		}
	case in.caught == nil:
		in.caught = s
		in.cancel()
		in.timer = time.AfterFunc(in.grace, in.force)
	default:
		in.force() // a second signal: stop waiting for the command
	}
}

// take makes signals go to the returned channel instead of stopping the
// command, until release is called.
func (in *interrupts) take() (sigs <-chan os.Signal, release func()) {
	ch := make(chan os.Signal, 2)
	in.mu.Lock()
	in.taken = ch
	in.mu.Unlock()
	return ch, func() {
		in.mu.Lock()
		in.taken = nil
		in.mu.Unlock()
	}
}

// signal returns the signal that stopped the command, or nil.
func (in *interrupts) signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.caught
}

// run runs fn and returns its error, or forced when a signal stopped the
// command and fn did not return within the grace (fn then runs on; the
// caller is about to exit).
func (in *interrupts) run(fn func() error) (err error, forced bool) {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err, false
	case <-in.forced:
		return nil, true
	}
}

// stop ends the routing of signals and waits for it.
func (in *interrupts) stop() {
	close(in.quit)
	<-in.done
	in.mu.Lock()
	if in.timer != nil {
		in.timer.Stop()
	}
	in.mu.Unlock()
	in.cancel()
}

// signalExit is the exit code of a command that signal s stopped: 128+N,
// as a shell reports a process killed by signal N.
func signalExit(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok && n > 0 {
		return wire.SignalExit(int(n))
	}
	return wire.SignalExit(int(syscall.SIGINT))
}

// interruptible returns r, or, when r may block for ever (a pipe, a
// terminal, anything but a regular file), a reader whose Read returns
// ctx's error once ctx is done, even while the read beneath is blocked:
// `sleep 1000 | agentctl write f` stops on Ctrl-C. That read is left
// behind on a goroutine of its own; the process is about to exit.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return r
		}
	}
	return &ctxReader{ctx: ctx, r: r, res: make(chan readResult, 1)}
}

// ctxReader reads r on another goroutine and stops waiting when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
	buf []byte // the goroutine reads into it, never into the caller's p
	res chan readResult
	err error // once ctx is done, for good
}

type readResult struct {
	n   int
	err error
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if err := c.ctx.Err(); err != nil {
		c.err = err
		return 0, err
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	buf := c.buf[:len(p)]
	go func() {
		n, err := c.r.Read(buf)
		c.res <- readResult{n, err}
	}()
	select {
	case r := <-c.res:
		return copy(p, buf[:r.n]), r.err
	case <-c.ctx.Done():
		c.err = c.ctx.Err()
		return 0, c.err
	}
}

// takeSignals is take for a's command; an app made without Main (in
// tests) gets IO.Signals as they come.
func (a *app) takeSignals() (sigs <-chan os.Signal, release func()) {
	if a.intr == nil {
		return a.io.Signals, func() {}
	}
	return a.intr.take()
}

// interrupted reports whether a signal stopped the command.
func (a *app) interrupted() bool { return a.intr != nil && a.intr.signal() != nil }
