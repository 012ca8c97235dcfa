package fleet

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Broadcaster delivers events to every replica sharing the store
// (store.Postgres: LISTEN/NOTIFY). A replica's store that is not one (a
// SQLite file has one hub) leaves the events local: the hub that builds
// the fleet decides which, once (Options.Broadcaster).
type Broadcaster interface {
	// Notify sends payload to every Listen on channel, this replica's too.
	Notify(ctx context.Context, channel, payload string) error
	// Listen calls fn with every notification on the channels until ctx
	// ends; after a gap (a lost connection) with an empty payload. ready
	// is called once listening.
	Listen(ctx context.Context, channels []string, fn func(channel, payload string), ready func())
}

// Channels of the events replicas send each other.
const (
	// chRevoke carries the ID of a revoked machine: whoever holds its
	// tunnel closes it.
	chRevoke = "agenthub_revoke"
	// chActivity says activity was stored: watchers on every replica read
	// the store again.
	chActivity = "agenthub_activity"
	// chSandbox carries the ID of a sandbox another replica has a call
	// for: its replica brings it online if it is not.
	chSandbox = "agenthub_sandbox"
)

// subscriptions are the hub's handlers of the other replicas' events.
type subscriptions struct {
	mu       sync.Mutex
	revoke   []func(machineID string)
	sandbox  []func(sandboxID string)
	activity []func()
}

// OnRevoke calls fn with the ID of every machine a replica (this one
// too) revoked, on the goroutine that receives the events: fn must return
// soon. The fleet itself closes the machine's tunnel, if it holds it,
// after fn.
func (f *Fleet) OnRevoke(fn func(machineID string)) {
	f.subs.mu.Lock()
	defer f.subs.mu.Unlock()
	f.subs.revoke = append(f.subs.revoke, fn)
}

// OnSandboxAsked calls fn with the ID of every sandbox a replica has a
// call for (AskSandbox), whichever replica drives it, on the goroutine
// that receives the events: fn must return soon.
func (f *Fleet) OnSandboxAsked(fn func(sandboxID string)) {
	f.subs.mu.Lock()
	defer f.subs.mu.Unlock()
	f.subs.sandbox = append(f.subs.sandbox, fn)
}

// OnActivity calls fn whenever a replica (this one too) stored activity
// (ActivityStored), on the goroutine that receives the events: fn must
// return soon.
func (f *Fleet) OnActivity(fn func()) {
	f.subs.mu.Lock()
	defer f.subs.mu.Unlock()
	f.subs.activity = append(f.subs.activity, fn)
}

// startBroadcast listens for the other replicas' events and starts the
// sender of activity events. It returns once listening (or after 10 s,
// with a warning: the heartbeat still catches revocations, only later).
func (f *Fleet) startBroadcast(ctx context.Context, b Broadcaster) {
	f.bcast = b
	f.pulse = make(chan struct{}, 1)
	ready := make(chan struct{})
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		b.Listen(f.ctx, []string{chRevoke, chActivity, chSandbox}, f.onBroadcast, func() { close(ready) })
	}()
	go func() {
		defer f.wg.Done()
		f.sendActivityPulses()
	}()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		f.log.Warn("not listening for other replicas' events yet")
	}
}

// onBroadcast handles another replica's (or this one's) event.
func (f *Fleet) onBroadcast(channel, payload string) {
	f.subs.mu.Lock()
	revoke, sandbox, activity := f.subs.revoke, f.subs.sandbox, f.subs.activity
	f.subs.mu.Unlock()
	switch channel {
	case chRevoke:
		if payload == "" {
			return // a gap: the heartbeat re-checks every tunnel
		}
		for _, fn := range revoke {
			fn(payload)
		}
		if _, held := f.tunnels.Get(payload); !held {
			return
		}
		m, err := f.o.Store.Machine(f.ctx, payload)
		if err == nil && !m.RevokedAt.IsZero() {
			f.log.Info("closing the tunnel of a machine revoked on another replica", zap.String("machine", payload))
			f.tunnels.Close(payload)
		}
	case chActivity:
		for _, fn := range activity {
			fn()
		}
	case chSandbox:
		for _, fn := range sandbox {
			fn(payload)
		}
	}
}

// ActivityStored tells the other replicas' watchers that activity was
// stored. It never waits: pulses sent while one is on its way collapse
// into one.
func (f *Fleet) ActivityStored() {
	if f.pulse == nil {
		return
	}
	select {
	case f.pulse <- struct{}{}:
	default:
	}
}

func (f *Fleet) sendActivityPulses() {
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.pulse:
			if err := f.bcast.Notify(f.ctx, chActivity, ""); err != nil && f.ctx.Err() == nil {
				f.log.Warn("telling other replicas of activity", zap.Error(err))
			}
		}
	}
}

// AskSandbox asks the replica that drives the sandbox to bring it online
// (none without a broadcaster).
func (f *Fleet) AskSandbox(ctx context.Context, sandboxID string) {
	f.notify(ctx, chSandbox, sandboxID)
}

// notify sends an event to every replica (none without a broadcaster).
func (f *Fleet) notify(ctx context.Context, channel, payload string) {
	if f.bcast == nil {
		return
	}
	if err := f.bcast.Notify(ctx, channel, payload); err != nil && ctx.Err() == nil {
		f.log.Warn("telling other replicas", zap.String("channel", channel), zap.String("payload", payload), zap.Error(err))
	}
}

// Revoke tells every replica to close the machine's tunnel (none without
// a broadcaster).
func (f *Fleet) Revoke(ctx context.Context, machineID string) {
	if f.bcast == nil {
		return
	}
	if err := f.bcast.Notify(ctx, chRevoke, machineID); err != nil {
		f.log.Warn("telling other replicas of a revocation (their heartbeat will catch it)", zap.String("machine", machineID), zap.Error(err))
	}
}
