package transport

import (
	"math"
	"time"
)

// Clock tells the time and waits. Tests substitute a fake to drive
// reconnects and nonce expiry without sleeping.
type Clock interface {
	Now() time.Time
	// After sends the time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Backoff paces reconnects. Zero fields get the defaults noted.
type Backoff struct {
	// Initial is the ceiling of the first wait. Default 1 s.
	Initial time.Duration
	// Multiplier grows the ceiling after each failure. Default 1.6.
	Multiplier float64
	// Max caps the ceiling. Default 30 s.
	Max time.Duration
	// ResetAfter: a tunnel that stayed up this long starts the next
	// reconnect from Initial again. Default 60 s.
	ResetAfter time.Duration
	// Rejected is the pace of retries after the hub refused the machine
	// (revoked, unknown, wrong key): each wait is between Rejected/2 and
	// Rejected. Default 5 min.
	Rejected time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = time.Second
	}
	if b.Multiplier < 1 {
		b.Multiplier = 1.6
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = time.Minute
	}
	if b.Rejected <= 0 {
		b.Rejected = 5 * time.Minute
	}
	return b
}

// delay is the wait before the next attempt after failures consecutive
// failures: full jitter, uniform in [0, min(Max, Initial·Multiplier^failures)).
func (b Backoff) delay(failures int, rnd func(int64) int64) time.Duration {
	ceil := float64(b.Initial) * math.Pow(b.Multiplier, float64(failures))
	if ceil > float64(b.Max) || math.IsInf(ceil, 0) || math.IsNaN(ceil) {
		ceil = float64(b.Max)
	}
	return time.Duration(randN(rnd, int64(ceil)))
}

// rejectedDelay is the wait after the hub refused the machine: never fast.
func (b Backoff) rejectedDelay(rnd func(int64) int64) time.Duration {
	half := int64(b.Rejected / 2)
	return time.Duration(half + randN(rnd, half))
}

// randN is rnd(n) kept inside [0, n), with n <= 0 meaning 0.
func randN(rnd func(int64) int64, n int64) int64 {
	if n <= 0 {
		return 0
	}
	switch v := rnd(n); {
	case v < 0:
		return 0
	case v >= n:
		return n - 1
	default:
		return v
	}
}
