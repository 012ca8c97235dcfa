package pairing

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// limiter is a token bucket per client address, in memory. It needs no
// goroutine: buckets refill lazily when touched, and full ones are swept
// out as the map grows.
type limiter struct {
	now   func() time.Time
	every time.Duration // one token per `every`
	burst int
	// sweepAbove is the map size above which full buckets are dropped (at
	// most once a minute); maxKeys bounds the map: addresses past it share
	// one bucket, so a flood of fresh addresses costs memory once.
	sweepAbove, maxKeys int

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// overflowKey is the bucket shared by addresses past maxKeys.
const overflowKey = "overflow"

func newLimiter(now func() time.Time, perMinute, burst int) *limiter {
	return &limiter{
		now:        now,
		every:      time.Minute / time.Duration(perMinute),
		burst:      burst,
		sweepAbove: 1024,
		maxKeys:    100_000,
		buckets:    make(map[string]*bucket),
	}
}

// take spends one of key's tokens. When there is none it returns false and
// how long until there will be one.
func (l *limiter) take(key string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.maxKeys {
			key = overflowKey
			b = l.buckets[key]
		}
		if b == nil {
			b = &bucket{tokens: float64(l.burst), at: now}
			l.buckets[key] = b
		}
	}
	l.refill(b, now)
	if b.tokens < 1 {
		wait := time.Duration((1 - b.tokens) * float64(l.every))
		return false, (wait + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
	}
	b.tokens--
	return true, 0
}

// refund gives back a token spent on an attempt that turned out well.
func (l *limiter) refund(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		b = l.buckets[overflowKey]
	}
	if b != nil {
		b.tokens = min(b.tokens+1, float64(l.burst))
	}
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = min(b.tokens+float64(elapsed)/float64(l.every), float64(l.burst))
		b.at = now
	}
}

// sweep drops buckets that have refilled completely: they hold nothing a
// new bucket would not.
func (l *limiter) sweep(now time.Time) {
	if len(l.buckets) <= l.sweepAbove || now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if l.refill(b, now); b.tokens >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}

// clientKey is the rate-limit key for a remote address ("host:port" or a
// bare host): the IPv4 address, or the IPv6 /64 (one host commonly holds a
// whole /64), or the string itself if it is not an IP.
func clientKey(remoteAddr string) string {
	host := clientHost(remoteAddr)
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// clientHost is the host part of a remote address, at most 64 bytes (what
// the store records as the address a code was redeemed from).
func clientHost(remoteAddr string) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	if len(host) > 64 {
		host = host[:64]
	}
	return host
}
