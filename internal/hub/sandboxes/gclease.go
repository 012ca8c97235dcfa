package sandboxes

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/archive"
)

// The archive store's GC runs in one place at a time: whoever holds the
// store's lease gcLease (replicas share one archive store and one
// database). A replica that finds it held waits for it, so that what it
// deleted is collected too (the holder's sweep may have listed the
// archives before the delete).
const (
	gcLease = "archive-gc"
	// gcLeaseTTL is how long a lease lasts unless its holder renews it
	// (every third of it while GC runs): a replica that dies holding it
	// blocks GC at most this long.
	gcLeaseTTL = 2 * time.Minute
	// gcLeaseWait is how often a replica that found the lease held asks
	// again, and gcLeaseTries how often at most.
	gcLeaseWait  = 2 * time.Second
	gcLeaseTries = 300
)

// gcHolder names this replica in the lease.
func (m *Manager) gcHolder() string {
	if m.o.Replicas != nil {
		return m.o.Replicas.ReplicaID()
	}
	return m.o.HubID
}

// collect runs the archive store's GC of org once this replica holds the
// GC lease, and gives the lease up after.
func (m *Manager) collect(ctx context.Context, orgID string) {
	holder := m.gcHolder()
	for try := 0; ; try++ {
		ok, err := m.o.Store.AcquireLease(ctx, gcLease, holder, m.o.Now(), gcLeaseTTL)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("taking the archive GC's lease", zap.Error(err))
			}
			return
		}
		if ok {
			break
		}
		if try == gcLeaseTries {
			m.log.Warn("the archive GC's lease stayed held; the next archive delete collects", zap.String("org", orgID))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gcLeaseWait):
		}
	}
	gctx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(gcLeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return
			case <-t.C:
				if ok, err := m.o.Store.AcquireLease(gctx, gcLease, holder, m.o.Now(), gcLeaseTTL); err == nil && !ok {
					m.log.Warn("the archive GC's lease was taken over: stopping this GC")
					cancel()
					return
				}
			}
		}
	}()
	_, err := m.o.Archive.GC(gctx, orgID)
	cancel()
	<-renewed
	if err != nil && !errors.Is(err, archive.ErrBusy) && ctx.Err() == nil {
		m.log.Warn("collecting an org's archive blobs", zap.String("org", orgID), zap.Error(err))
	}
	if err := m.o.Store.ReleaseLease(context.WithoutCancel(ctx), gcLease, holder); err != nil {
		m.log.Warn("giving up the archive GC's lease", zap.Error(err))
	}
}
