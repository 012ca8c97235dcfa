package machinetop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestRows: CPU % from the growth of CPU time between two samples (a
// first one waits for a second), offline machines left out, a failure
// listed with its error, the order kept.
func TestRows(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	base := time.Unix(1000, 0)
	ask := func(_ context.Context, id string) (Sample, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[id]++
		n := calls[id]
		switch id {
		case "off":
			return Sample{}, ErrOffline
		case "bad":
			return Sample{}, errors.New("no answer")
		}
		// Half a core: 0.5 s of CPU per second of samples.
		return Sample{At: base.Add(time.Duration(n) * time.Second), CPUNanos: uint64(n) * 5e8, Commands: 2, CPUs: 4}, nil
	}
	top := New(Options{FirstGap: time.Millisecond})
	ms := []Machine{{ID: "a", Name: "A"}, {ID: "off"}, {ID: "bad", Name: "B"}}
	rows := top.Rows(t.Context(), ms, ask)
	if len(rows) != 2 || rows[0].ID != "a" || rows[1].ID != "bad" {
		t.Fatalf("rows %+v, want a then bad", rows)
	}
	if rows[0].CPUPercent != 50 || rows[0].Commands != 2 || rows[0].CPUs != 4 || calls["a"] != 2 {
		t.Errorf("a: %+v after %d asks, want 50%% after 2 (a first sample waits for a second)", rows[0], calls["a"])
	}
	if rows[1].Err != "no answer" {
		t.Errorf("bad: %+v, want its error", rows[1])
	}
	// The next call measures from the kept sample: one ask.
	rows = top.Rows(t.Context(), ms[:1], ask)
	if calls["a"] != 3 || rows[0].CPUPercent != 50 {
		t.Errorf("second call: %+v after %d asks, want 50%% after 3", rows, calls["a"])
	}
}
