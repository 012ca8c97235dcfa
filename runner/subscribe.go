package runner

import (
	"context"
	"errors"
	"io"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// ErrClosed is returned by Subscription.Next after Close.
var ErrClosed = errors.New("runner: subscription closed")

// Subscription delivers the events of one process to one reader: Started,
// then the retained output from the requested offsets (with a Gap where
// retention dropped bytes), then live output as it arrives, then Exited.
//
// A live subscription holds the process's output back rather than lose
// any of it (see Options.StallTimeout for the limit), so its owner must
// keep calling Next or end it: by Close, by cancelling the context it was
// made with, or by reading to the end. It starts no goroutine.
type Subscription struct {
	p    *Process
	ctx  context.Context
	stop func() bool // stops the AfterFunc that detaches on ctx.Done

	// Guarded by p.mu.
	pos      [2]int64 // next offset to deliver, per output index
	started  bool     // Started was delivered
	ended    bool     // Exited was delivered
	detached bool     // no longer in p.subs
	lossy    bool     // demoted: does not hold the output back

	reuse bool   // Output data goes into buf, valid until the next Next (see ReuseBuffer)
	buf   []byte // owned by the caller of Next between calls
}

// Attach subscribes to the process's events, replaying retained output
// from the offsets in from. The subscription ends when ctx is done.
func (p *Process) Attach(ctx context.Context, from Offsets) (*Subscription, error) {
	if from.Stdout < 0 || from.Stderr < 0 {
		return nil, errs.New(errs.Invalid, "offsets must not be negative (got stdout %d, stderr %d)", from.Stdout, from.Stderr)
	}
	return p.subscribe(ctx, from), nil
}

func (p *Process) subscribe(ctx context.Context, from Offsets) *Subscription {
	s := &Subscription{p: p, ctx: ctx, pos: [2]int64{from.Stdout, from.Stderr}}
	p.mu.Lock()
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	s.stop = context.AfterFunc(ctx, s.detach)
	return s
}

// ReuseBuffer makes Next hand out Output data in one buffer that the
// subscription reuses: an Output's Data is then valid only until the next
// call to Next. For a caller that consumes each event (sends it, writes it
// out) before asking for the next, it saves an allocation per event.
func (s *Subscription) ReuseBuffer() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.reuse = true
}

// Close ends the subscription. The process is not affected.
func (s *Subscription) Close() {
	s.stop()
	s.detach()
}

func (s *Subscription) detach() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.detachLocked()
}

func (s *Subscription) detachLocked() {
	if s.detached {
		return
	}
	s.detached = true
	delete(s.p.subs, s)
	s.p.broadcastLocked()
}

// Next returns the next event, waiting for it if need be. After Exited it
// returns io.EOF; once the subscription's context is done, its error; after
// Close, ErrClosed. Next must not be called concurrently with itself.
func (s *Subscription) Next() (Event, error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case s.ended:
			return nil, io.EOF
		case s.ctx.Err() != nil:
			s.detachLocked()
			return nil, s.ctx.Err()
		case s.detached:
			return nil, ErrClosed
		}
		if ev := s.nextLocked(); ev != nil {
			return ev, nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-s.ctx.Done():
		}
		p.mu.Lock()
	}
}

// nextLocked returns the next event if one is ready, else nil.
//
// Of the streams with something to deliver it picks the one whose next
// byte was written first, and delivers no further than where the other
// stream's pending bytes were written: a caught-up subscriber sees stdout
// and stderr interleaved as the process produced them.
func (s *Subscription) nextLocked() Event {
	p := s.p
	if !s.started {
		s.started = true
		return Started{ID: p.id, PID: p.pid, StartTime: p.start}
	}
	best, bestSeq := -1, uint64(0)
	var seqs [2]uint64
	var pending [2]bool
	for i, r := range p.streams {
		pos := s.pos[i]
		if _, gap := r.gap(pos); gap {
			seqs[i] = 0
		} else if pos < r.total {
			seqs[i] = r.seqAt(pos)
		} else {
			continue
		}
		pending[i] = true
		if best < 0 || seqs[i] < bestSeq {
			best, bestSeq = i, seqs[i]
		}
	}
	if best >= 0 {
		r := p.streams[best]
		pos := s.pos[best]
		if resume, gap := r.gap(pos); gap {
			s.pos[best] = resume
			return Gap{Stream: p.kinds[best], Offset: pos, Bytes: resume - pos}
		}
		limit := r.total
		for j := range p.streams {
			if j != best && pending[j] {
				limit = min(limit, r.limitBefore(pos, seqs[j]))
			}
		}
		data := r.readInto(s.buf, pos, chunkSize, limit)
		if len(data) == 0 { // cannot happen; never stall on it
			data = r.readInto(s.buf, pos, chunkSize, r.total)
		}
		if s.reuse {
			s.buf = data[:0]
		}
		s.pos[best] += int64(len(data))
		if s.lossy && s.caughtUpLocked() {
			s.lossy = false
		}
		if p.readersBlocked > 0 {
			p.broadcastLocked()
		}
		return Output{Stream: p.kinds[best], Offset: pos, Data: data}
	}
	if p.exit != nil {
		s.ended = true
		s.detachLocked()
		return Exited{ExitInfo: *p.exitCopyLocked()}
	}
	return nil
}

func (s *Subscription) caughtUpLocked() bool {
	for i, r := range s.p.streams {
		if s.pos[i] < r.total {
			return false
		}
	}
	return true
}
