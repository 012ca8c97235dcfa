package transport

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Why a handshake failed, beyond the Reasons the hub sends in a verdict:
// these end the handshake before there is one.
const (
	refusedTimeout      = "timeout"      // no answer to the challenge in time
	refusedDisconnected = "disconnected" // the connection broke mid-handshake
)

// refusalKinds are the reasons a refusal is counted under, in the order
// [Acceptor.Refused] reports them: every [Reason], then the handshakes that
// ended without a verdict.
var refusalKinds = [...]string{
	string(ReasonBadSignature),
	string(ReasonReplayed),
	string(ReasonUnknownMachine),
	string(ReasonRevoked),
	string(ReasonExpired),
	string(ReasonWrongHost),
	string(ReasonBadRequest),
	string(ReasonUnavailable),
	string(ReasonWrongEndpoint),
	refusedTimeout,
	refusedDisconnected,
}

// RefusalCount is how many tunnel handshakes an Acceptor refused for one
// reason since it was made.
type RefusalCount struct {
	Reason string // a Reason, or timeout or disconnected (no verdict)
	Count  int64
}

const (
	// refusalLinesPerWindow bounds the refusals logged one by one in a
	// window: the first from each address, up to this many addresses.
	refusalLinesPerWindow = 10
	// refusalAddrsPerWindow bounds the addresses a window remembers.
	refusalAddrsPerWindow = 10000
)

// refusals counts refused handshakes and keeps their logs bounded whatever
// an unauthenticated client sends: in each window (opened by a refusal and
// lasting interval), the first refusal from an address is logged in full
// (for at most refusalLinesPerWindow addresses), and when the window ends
// one summary line tells the rest, if there was any.
type refusals struct {
	log      *zap.Logger
	clock    Clock
	interval time.Duration
	done     <-chan struct{} // closed when the acceptor closes: flush now
	goFn     func(func())    // runs the window's timer, owned by the acceptor

	total [len(refusalKinds)]atomic.Int64 // since the start, for the metric

	mu     sync.Mutex
	open   bool      // a window is open
	start  time.Time // when it opened
	counts [len(refusalKinds)]int
	n      int                 // refusals in the window
	logged int                 // of them logged one by one
	addrs  map[string]struct{} // addresses seen in the window (bounded)
	many   bool                // more addresses than addrs holds
}

func kindIndex(reason string) int {
	for i, k := range refusalKinds {
		if k == reason {
			return i
		}
	}
	return len(refusalKinds) - 1 // not reached: every reason is listed
}

// counted returns the totals since the start, in refusalKinds' order.
func (r *refusals) counted() []RefusalCount {
	out := make([]RefusalCount, len(refusalKinds))
	for i, k := range refusalKinds {
		out[i] = RefusalCount{Reason: k, Count: r.total[i].Load()}
	}
	return out
}

// record counts one refusal and logs it if it is the first from its address
// in the window. reason is one of refusalKinds; cause is the error behind
// a handshake without a verdict (nil for a verdict).
func (r *refusals) record(reason, machine, remote string, cause error) {
	i := kindIndex(reason)
	r.total[i].Add(1)

	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.open && !now.Before(r.start.Add(r.interval)) {
		r.flushLocked(now) // its timer has not run yet
	}
	if !r.open {
		r.open, r.start = true, now
		r.addrs = make(map[string]struct{})
		start := now
		r.goFn(func() { r.wait(start) })
	}
	r.counts[i]++
	r.n++
	addr := addrHost(remote)
	if _, seen := r.addrs[addr]; seen {
		return
	}
	if len(r.addrs) >= refusalAddrsPerWindow {
		r.many = true
		return
	}
	r.addrs[addr] = struct{}{}
	if r.logged >= refusalLinesPerWindow {
		return
	}
	r.logged++
	fields := []zap.Field{zap.String("machine", machine), zap.String("remote", remote), zap.String("reason", reason)}
	if cause != nil {
		r.log.Info("tunnel handshake failed", append(fields, zap.Error(cause))...)
		return
	}
	r.log.Check(levelOf(reason), "tunnel refused").Write(fields...)
}

// wait ends the window opened at start when its interval has passed, or
// at once when the acceptor closes.
func (r *refusals) wait(start time.Time) {
	select {
	case <-r.clock.After(r.interval):
	case <-r.done:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open && r.start.Equal(start) {
		r.flushLocked(r.clock.Now())
	}
}

// flushLocked closes the window and, if some refusals in it were not
// logged one by one, logs the summary.
func (r *refusals) flushLocked(now time.Time) {
	if r.n > r.logged {
		var parts []string
		level := zapcore.InfoLevel
		fields := []zap.Field{zap.Int("refused", r.n)}
		for i, c := range r.counts {
			if c == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %d", strings.ReplaceAll(refusalKinds[i], "_", " "), c))
			fields = append(fields, zap.Int(refusalKinds[i], c))
			level = max(level, levelOf(refusalKinds[i]))
		}
		addrs := fmt.Sprintf("%d", len(r.addrs))
		if r.many {
			addrs += "+"
		}
		plural := "es"
		if len(r.addrs) == 1 && !r.many {
			plural = ""
		}
		window := min(now.Sub(r.start), r.interval)
		fields = append(fields, zap.Int("addresses", len(r.addrs)), zap.Duration("window", window))
		msg := fmt.Sprintf("tunnel handshakes refused in the last %s: %d (%s) from %s address%s",
			shortDuration(window), r.n, strings.Join(parts, ", "), addrs, plural)
		r.log.Check(level, msg).Write(fields...)
	}
	r.open, r.n, r.logged, r.many, r.addrs = false, 0, 0, false, nil
	r.counts = [len(refusalKinds)]int{}
}

// levelOf is how loudly a refusal is logged: a wrong signature or a
// replayed answer may be someone trying a machine's identity.
func levelOf(reason string) zapcore.Level {
	if reason == string(ReasonBadSignature) || reason == string(ReasonReplayed) {
		return zapcore.WarnLevel
	}
	return zapcore.InfoLevel
}

// addrHost is the host of a host:port: each connection has a port of its own.
func addrHost(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// shortDuration writes 1m rather than 1m0s, 30s rather than 30.000s.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d >= time.Second:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}
