package ctl

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestInterruptsStopTheCommand: a signal cancels the command's context and
// is what Main reports; a command that takes signals gets them instead.
func TestInterruptsStopTheCommand(t *testing.T) {
	t.Parallel()
	sigs := make(chan os.Signal, 1)
	ctx, in := watchInterrupts(t.Context(), sigs, time.Minute)
	defer in.stop()

	taken, release := in.take()
	sigs <- os.Interrupt
	if s := <-taken; s != os.Interrupt || ctx.Err() != nil || in.signal() != nil {
		t.Fatalf("while taken: got %v, ctx %v, caught %v; want the signal delivered, ctx alive", s, ctx.Err(), in.signal())
	}
	release()

	sigs <- syscall.SIGTERM
	<-ctx.Done()
	if s := in.signal(); s != syscall.SIGTERM || signalExit(s) != 143 {
		t.Errorf("caught %v (exit %d), want SIGTERM (143)", s, signalExit(s))
	}
}

// TestInterruptsForceAfterGrace: a command that does not return after the
// signal is left behind once the grace is over, or at a second signal.
func TestInterruptsForceAfterGrace(t *testing.T) {
	t.Parallel()
	for _, second := range []bool{false, true} {
		grace := 10 * time.Millisecond
		if second {
			grace = time.Hour
		}
		sigs := make(chan os.Signal, 2)
		_, in := watchInterrupts(t.Context(), sigs, grace)
		stuck := make(chan struct{})
		sigs <- os.Interrupt
		if second {
			sigs <- os.Interrupt
		}
		err, forced := in.run(func() error { <-stuck; return nil })
		close(stuck) // the command's goroutine ends: nothing leaks
		in.stop()
		if err != nil || !forced || signalExit(in.signal()) != 130 {
			t.Errorf("second signal %v: err %v, forced %v, caught %v; want forced, SIGINT", second, err, forced, in.signal())
		}
	}
}

// TestInterruptibleRead: a read blocked on a pipe returns once ctx is done.
func TestInterruptibleRead(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close() // ends the read left behind
	ctx, cancel := context.WithCancel(t.Context())
	r := interruptible(ctx, pr)
	go func() { _, _ = pw.Write([]byte("abc")) }()
	buf := make([]byte, 8)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("Read = %q, %v; want abc", buf[:n], err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.Read(buf); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("blocked Read after cancel: %v, want context.Canceled", err)
	}
	if _, err := r.Read(buf); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel: %v, want context.Canceled for good", err)
	}
}
