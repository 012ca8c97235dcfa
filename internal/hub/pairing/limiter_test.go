package pairing

import (
	"fmt"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store/storetest"
)

func TestClientKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"192.0.2.1:5000", "192.0.2.1"},
		{"192.0.2.1", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:5000", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"[fe80::1%eth0]:22", "fe80::/64"},
		{"@", "@"}, // a unix socket or anything else: the string itself
		{"", ""},
	}
	for _, tt := range tests {
		if got := clientKey(tt.in); got != tt.want {
			t.Errorf("clientKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLimiterRefillAndRefund(t *testing.T) {
	t.Parallel()
	c := &clock{now: storetest.T0}
	l := newLimiter(c.Now, 60, 3) // a token a second, 3 at once
	steps := []struct {
		name     string
		advance  time.Duration
		refund   bool
		wantOK   bool
		wantWait time.Duration
	}{
		{"1", 0, false, true, 0},
		{"2", 0, false, true, 0},
		{"3", 0, false, true, 0},
		{"empty", 0, false, false, time.Second},
		{"half a token", 500 * time.Millisecond, false, false, time.Second},
		{"a whole one", 500 * time.Millisecond, false, true, 0},
		{"refunded", 0, true, true, 0},
		{"empty again", 0, false, false, time.Second},
		{"never more than burst", time.Hour, false, true, 0},
		{"2 of 3", 0, false, true, 0},
		{"3 of 3", 0, false, true, 0},
		{"4 of 3", 0, false, false, time.Second},
	}
	for _, st := range steps {
		c.Advance(st.advance)
		if st.refund {
			l.refund("k")
		}
		ok, wait := l.take("k")
		if ok != st.wantOK || wait != st.wantWait {
			t.Errorf("%s: take = %v, %v; want %v, %v", st.name, ok, wait, st.wantOK, st.wantWait)
		}
	}
}

func TestLimiterMemoryIsBounded(t *testing.T) {
	t.Parallel()
	c := &clock{now: storetest.T0}
	l := newLimiter(c.Now, 10, 10)
	l.sweepAbove, l.maxKeys = 10, 100
	for i := range l.maxKeys + 10 {
		l.take(fmt.Sprint("k", i))
	}
	if n := len(l.buckets); n != l.maxKeys+1 {
		t.Errorf("%d buckets after %d addresses, want %d (the rest share one)", n, l.maxKeys+10, l.maxKeys+1)
	}
	// Buckets that have refilled are swept out once a minute has passed.
	c.Advance(2 * time.Minute)
	l.take("fresh")
	if n := len(l.buckets); n != 1 {
		t.Errorf("%d buckets after the sweep, want 1", n)
	}
}
