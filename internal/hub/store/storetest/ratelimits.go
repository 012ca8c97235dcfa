package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

func testRateLimits(t *testing.T, s store.Store) {
	ctx := t.Context()
	const every, burst = time.Second, 3 // a token a second, 3 at once
	at := T0
	steps := []struct {
		name     string
		advance  time.Duration
		give     bool // return a token first
		wantOK   bool
		wantWait time.Duration
	}{
		{"1", 0, false, true, 0},
		{"2", 0, false, true, 0},
		{"3", 0, false, true, 0},
		{"empty", 0, false, false, time.Second},
		{"half a token", 500 * time.Millisecond, false, false, 500 * time.Millisecond},
		{"a whole one", 500 * time.Millisecond, false, true, 0},
		{"returned", 0, true, true, 0},
		{"empty again", 0, false, false, time.Second},
		{"never more than burst", time.Hour, false, true, 0},
		{"2 of 3", 0, false, true, 0},
		{"3 of 3", 0, false, true, 0},
		{"4 of 3", 0, false, false, time.Second},
	}
	for _, st := range steps {
		at = at.Add(st.advance)
		if st.give {
			noErr(t, s.ReturnToken(ctx, "k", every))
		}
		ok, wait, err := s.TakeToken(ctx, "k", every, burst, at)
		noErr(t, err)
		if ok != st.wantOK || wait != st.wantWait {
			t.Errorf("%s: TakeToken = %v, %v; want %v, %v", st.name, ok, wait, st.wantOK, st.wantWait)
		}
	}
	// Another key has a bucket of its own.
	if ok, _, err := s.TakeToken(ctx, "other", every, burst, at); !ok || err != nil {
		t.Errorf("other key: TakeToken = %v, %v; want a token", ok, err)
	}

	// Bad input changes nothing.
	for _, bad := range []struct {
		name  string
		key   string
		every time.Duration
		burst int
		at    time.Time
	}{
		{"empty key", "", every, burst, at},
		{"no period", "k", 0, burst, at},
		{"no burst", "k", every, 0, at},
		{"zero time", "k", every, burst, time.Time{}},
	} {
		_, _, err := s.TakeToken(ctx, bad.key, bad.every, bad.burst, bad.at)
		wantErr(t, bad.name, err, store.ErrInvalid)
	}
	if ok, _, _ := s.TakeToken(ctx, "k", every, burst, at); ok {
		t.Errorf("k had a token after the bad calls; want none (3 of 3 taken)")
	}

	// Full buckets are forgotten; the others are kept.
	n := must(s.DeleteRateLimits(ctx, at.Add(2*time.Second)))(t)
	if n != 1 {
		t.Errorf("DeleteRateLimits deleted %d buckets, want 1 (other's)", n)
	}
	if ok, _, _ := s.TakeToken(ctx, "k", every, burst, at); ok {
		t.Errorf("k lost its state to DeleteRateLimits")
	}
}

// testRateLimitsConcurrently takes tokens from many goroutines at once:
// exactly burst of them get one.
func testRateLimitsConcurrently(t *testing.T, s store.Store) {
	const n, burst = 12, 5
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  int
		errs []error
	)
	for range n {
		wg.Go(func() {
			ok, _, err := s.TakeToken(t.Context(), "k", time.Hour, burst, T0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				got++
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if got != burst {
		t.Errorf("%d of %d concurrent takes got a token, want %d", got, n, burst)
	}
}
