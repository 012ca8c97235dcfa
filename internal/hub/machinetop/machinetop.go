// Package machinetop makes agentctl top's machine rows from what each
// paired machine's agentd reports (SystemService.Stats: what the commands
// it started use, and the host's load). A machine is not a container:
// there is no engine to ask, so the CPU time its agentd counts is turned
// into a percentage here, over the caller's interval, from the previous
// sample kept of each machine; a machine with none is asked again a
// second later, so a first answer is never a made-up 0. Machines are
// asked in parallel; offline ones are left out, one that fails is listed
// with its error.
package machinetop

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrOffline is what an Asker returns for a machine with no tunnel.
var ErrOffline = errors.New("machine offline")

// Sample is one report of a machine's agentd.
type Sample struct {
	At          time.Time
	CPUNanos    uint64 // CPU time of the running commands' process groups so far
	MemoryBytes int64  // their resident memory
	Processes   int64
	Commands    int32
	Load1       float64 // the host's 1-minute load average
	CPUs        int32
	// The host's memory, total and available (0: unknown).
	MemoryTotal, MemoryAvailable int64
}

// Machine names a machine to ask.
type Machine struct{ ID, Name string }

// Row is one machine's line of top.
type Row struct {
	Machine
	Err        string  // set: it did not answer (the rest is empty)
	CPUPercent float64 // of one core, since the previous sample
	Sample
}

// Asker asks machine id for a sample (ErrOffline: it has no tunnel).
type Asker func(ctx context.Context, id string) (Sample, error)

// Options configures a Top. Zero fields get defaults.
type Options struct {
	// Timeout bounds asking one machine (default 3 s).
	Timeout time.Duration
	// FirstGap is how long a machine's first sample waits for its second
	// (default 1 s, docker stats's own interval).
	FirstGap time.Duration
	// Keep is how long a sample serves as the previous one (default 10 min).
	Keep time.Duration
}

// Top keeps each machine's last sample.
type Top struct {
	o    Options
	mu   sync.Mutex
	kept map[string]Sample
}

// New returns a Top.
func New(o Options) *Top {
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.FirstGap <= 0 {
		o.FirstGap = time.Second
	}
	if o.Keep <= 0 {
		o.Keep = 10 * time.Minute
	}
	return &Top{o: o, kept: map[string]Sample{}}
}

// Rows asks each of ms with ask, in parallel, and returns the rows of
// those not offline, in the order of ms.
func (t *Top) Rows(ctx context.Context, ms []Machine, ask Asker) []Row {
	rows := make([]*Row, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i] = t.row(ctx, m, ask)
		}()
	}
	wg.Wait()
	var out []Row
	for _, r := range rows {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out
}

func (t *Top) row(ctx context.Context, m Machine, ask Asker) *Row {
	get := func() (Sample, error) {
		ctx, cancel := context.WithTimeout(ctx, t.o.Timeout)
		defer cancel()
		return ask(ctx, m.ID)
	}
	cur, err := get()
	if errors.Is(err, ErrOffline) {
		return nil
	}
	if err != nil {
		return &Row{Machine: m, Err: err.Error()}
	}
	prev, ok := t.previous(m.ID, cur)
	if !ok {
		select {
		case <-time.After(t.o.FirstGap):
		case <-ctx.Done():
			return &Row{Machine: m, Err: ctx.Err().Error()}
		}
		prev = cur
		if cur, err = get(); err != nil {
			return &Row{Machine: m, Err: err.Error()}
		}
		t.previous(m.ID, cur)
	}
	r := &Row{Machine: m, Sample: cur}
	if d := cur.At.Sub(prev.At); d > 0 && cur.CPUNanos >= prev.CPUNanos {
		r.CPUPercent = float64(cur.CPUNanos-prev.CPUNanos) / float64(d.Nanoseconds()) * 100
	}
	return r
}

// previous returns machine id's kept sample, if not older than Keep, and
// keeps cur in its place.
func (t *Top) previous(id string, cur Sample) (Sample, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, s := range t.kept {
		if cur.At.Sub(s.At) > t.o.Keep {
			delete(t.kept, k)
		}
	}
	prev, ok := t.kept[id]
	t.kept[id] = cur
	return prev, ok
}
