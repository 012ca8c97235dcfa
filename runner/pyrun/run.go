package pyrun

import (
	"context"
	"fmt"
	"os"
	"time"
)

// emitter delivers a run's events to its caller. Its methods run with the
// session's outMu held (or after the sink was cleared), one at a time.
type emitter struct {
	emit   func(Event) error
	err    error         // the first error of emit; later events are dropped
	failed chan struct{} // closed when emit failed
	errors bool          // an Error was sent
}

func newEmitter(emit func(Event) error) *emitter {
	return &emitter{emit: emit, failed: make(chan struct{})}
}

func (e *emitter) send(ev Event) {
	if _, ok := ev.(Error); ok {
		e.errors = true
	}
	if e.err != nil {
		return
	}
	if err := e.emit(ev); err != nil {
		e.err = err
		close(e.failed)
	}
}

// runParams is how one run goes.
type runParams struct {
	req     request
	timeout time.Duration // 0: none
	grace   time.Duration // after the interrupt, before the kill
	oneOff  bool
}

// run runs one request in the session and emits its events, Done last. It
// reports whether the interpreter is still alive and usable, and the error
// that kept events from reaching the caller, if any.
func (s *session) run(ctx context.Context, p runParams, emit func(Event) error) (alive bool, err error) {
	start := time.Now()
	em := newEmitter(emit)
	s.setSink(em)
	defer s.setSink(nil)

	frame, err := encodeRequest(p.req)
	if err != nil {
		return true, fmt.Errorf("encode python request: %w", err)
	}
	if err := s.write(frame); err != nil {
		s.kill(fmt.Sprintf("the interpreter did not take the code (%v), so it was killed", err))
		return false, s.died(em, start, false, p.oneOff)
	}

	var timeoutC, graceC <-chan time.Time
	if p.timeout > 0 {
		t := time.NewTimer(p.timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	var graceTimer *time.Timer
	defer func() {
		if graceTimer != nil {
			graceTimer.Stop()
		}
	}()
	var timedOut bool
	var reason string // why the interrupt was sent, for the kill that may follow
	interrupt := func(why string) {
		if graceTimer != nil {
			return
		}
		reason = why
		s.interrupt()
		graceTimer = time.NewTimer(p.grace)
		graceC = graceTimer.C
	}
	ctxDone := ctx.Done()
	emitFailed := em.failed
	replies := s.replies
	var brokenC <-chan time.Time
	for {
		select {
		case m, ok := <-replies:
			if !ok {
				// The interpreter is exiting, or the code closed the pipe.
				replies = nil
				brokenC = time.After(drainGrace)
				continue
			}
			switch m.Ev {
			case "result":
				s.syncOutput()
				s.emit(Result{Repr: m.Repr})
			case "error":
				s.syncOutput()
				s.emit(Error{Name: m.Name, Value: m.Value, Traceback: m.Traceback})
			case "done":
				s.syncOutput()
				s.setSink(nil)
				em.send(Done{Duration: time.Since(start), TimedOut: timedOut, Failed: em.errors, SessionAlive: !p.oneOff})
				return true, em.err
			}
		case <-timeoutC:
			timeoutC = nil
			timedOut = true
			interrupt(fmt.Sprintf("the run went on for %s after the KeyboardInterrupt sent at its %s timeout, so its interpreter was killed", p.grace, p.timeout))
		case <-ctxDone:
			ctxDone = nil
			interrupt(fmt.Sprintf("the caller went away and the run ignored KeyboardInterrupt for %s, so its interpreter was killed", p.grace))
		case <-emitFailed:
			emitFailed = nil
			interrupt(fmt.Sprintf("the run's output could not be delivered and it ignored KeyboardInterrupt for %s, so its interpreter was killed", p.grace))
		case <-graceC:
			graceC = nil
			s.kill(reason)
		case <-brokenC:
			brokenC = nil
			s.kill("the driver's control pipe broke (did the code close its file descriptors?), so the interpreter was killed")
		case <-s.leaderExited:
			return false, s.died(em, start, timedOut, p.oneOff)
		}
	}
}

// died ends a run whose interpreter is gone (it exited, or the daemon killed
// it): it forwards the output and replies that are left, says why, and
// emits Done.
func (s *session) died(em *emitter, start time.Time, timedOut, oneOff bool) error {
	s.kill("") // whatever is left of the process group
	<-s.leaderExited
	s.drainOutput()
	finished := false
	s.drainControl(func(m reply) {
		switch m.Ev {
		case "result":
			s.emit(Result{Repr: m.Repr})
		case "error":
			s.emit(Error{Name: m.Name, Value: m.Value, Traceback: m.Traceback})
		case "done":
			finished = true
		}
	})
	<-s.waitReaped()
	s.setSink(nil)

	s.mu.Lock()
	reason := s.killReason
	s.mu.Unlock()
	lost := ""
	if !oneOff {
		lost = fmt.Sprintf("; session %q was discarded with its globals, and its next run starts a fresh interpreter", s.name)
	}
	switch {
	case reason != "":
		em.send(Error{Name: "Killed", Value: reason + lost})
	case finished:
		// The run completed; then the interpreter ended (a thread of the code).
	case s.state != nil && s.state.Success():
		// os._exit(0): the code ended its interpreter on purpose.
	default:
		em.send(Error{Name: "InterpreterExited", Value: fmt.Sprintf("the Python interpreter %s during the run (os._exit, or a crash)%s", describeExit(s.state), lost)})
	}
	em.send(Done{Duration: time.Since(start), TimedOut: timedOut, Failed: em.errors, SessionAlive: false})
	return em.err
}

// describeExit says how a process ended, in words.
func describeExit(st *os.ProcessState) string {
	if st == nil {
		return "ended"
	}
	if sig, ok := killedBy(st); ok {
		return sig
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}
