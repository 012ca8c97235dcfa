package hub

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Broadcaster delivers events to every replica sharing the store
// (store.Postgres: LISTEN/NOTIFY). A replica's store that is not one (a
// SQLite file has one hub) leaves the events local.
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
)

// startBroadcast listens for the other replicas' events, if the store can
// carry them, and starts the sender of activity events. It returns once
// listening (or after 10 s, with a warning: the heartbeat still catches
// revocations, only later).
func (s *Server) startBroadcast(ctx context.Context) {
	b, ok := s.store.(Broadcaster)
	if !ok {
		return
	}
	s.bcast = b
	s.activityPulse = make(chan struct{}, 1)
	ready := make(chan struct{})
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		b.Listen(s.ctx, []string{chRevoke, chActivity, chSandbox}, s.onBroadcast, func() { close(ready) })
	}()
	go func() {
		defer s.wg.Done()
		s.sendActivityPulses()
	}()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		s.log.Warn("not listening for other replicas' events yet")
	}
}

// onBroadcast handles another replica's (or this one's) event.
func (s *Server) onBroadcast(channel, payload string) {
	switch channel {
	case chRevoke:
		if payload == "" {
			return // a gap: the heartbeat re-checks every tunnel
		}
		if s.sandboxes != nil && isSandboxID(payload) {
			s.sandboxes.RemoveGone(payload) // if it is this replica's and its row is gone
		}
		if _, held := s.registry.Get(payload); !held {
			return
		}
		m, err := s.store.Machine(s.ctx, payload)
		if err == nil && !m.RevokedAt.IsZero() {
			s.log.Info("closing the tunnel of a machine revoked on another replica", zap.String("machine", payload))
			s.registry.Close(payload)
		}
	case chActivity:
		s.activity.Notify()
	case chSandbox:
		if s.sandboxes != nil && isSandboxID(payload) {
			s.sandboxes.Asked(payload) // if it is this replica's
		}
	}
}

// pulseActivity tells the other replicas' watchers that activity was
// stored. It never waits: pulses sent while one is on its way collapse
// into one.
func (s *Server) pulseActivity() {
	if s.activityPulse == nil {
		return
	}
	select {
	case s.activityPulse <- struct{}{}:
	default:
	}
}

func (s *Server) sendActivityPulses() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.activityPulse:
			if err := s.bcast.Notify(s.ctx, chActivity, ""); err != nil && s.ctx.Err() == nil {
				s.log.Warn("telling other replicas of activity", zap.Error(err))
			}
		}
	}
}

// notify sends an event to every replica (none without a broadcaster).
func (s *Server) notify(ctx context.Context, channel, payload string) {
	if s.bcast == nil {
		return
	}
	if err := s.bcast.Notify(ctx, channel, payload); err != nil && ctx.Err() == nil {
		s.log.Warn("telling other replicas", zap.String("channel", channel), zap.String("payload", payload), zap.Error(err))
	}
}

// broadcastRevoke tells every replica to close the machine's tunnel.
func (s *Server) broadcastRevoke(ctx context.Context, machineID string) {
	if s.bcast == nil {
		return
	}
	if err := s.bcast.Notify(ctx, chRevoke, machineID); err != nil {
		s.log.Warn("telling other replicas of a revocation (their heartbeat will catch it)", zap.String("machine", machineID), zap.Error(err))
	}
}
