package console

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// statsBackend answers SandboxStats with one sandbox whose CPU grows by
// one each call; signedOut ends its session. The rest of Backend is not
// used by the sampler (nil: a call would panic).
type statsBackend struct {
	Backend
	hubv1.UnimplementedEnvironmentServiceServer
	calls     atomic.Int64
	signedOut atomic.Bool
}

func (b *statsBackend) Environments() hubv1.EnvironmentServiceServer { return b }

func (b *statsBackend) As(ctx context.Context, _ store.ConsoleSession) (context.Context, Identity, error) {
	if b.signedOut.Load() {
		return nil, Identity{}, ErrSignedOut
	}
	return ctx, Identity{Name: "t", Org: "acme"}, nil
}

func (b *statsBackend) SandboxStats(context.Context, *hubv1.SandboxStatsRequest) (*hubv1.SandboxStatsResponse, error) {
	n := b.calls.Add(1)
	return &hubv1.SandboxStatsResponse{Sampled: timestamppb.Now(), Sandboxes: []*hubv1.SandboxUsage{
		{Id: "sb-1", Environment: "builtin", Conversation: "c-1", CpuPercent: float64(n), MemoryBytes: n << 20, MemoryLimit: 64 << 20}}}, nil
}

type liveSessions struct{ store.ConsoleSessions }

func (liveSessions) ConsoleSession(_ context.Context, h store.TokenHash, _ time.Time) (store.ConsoleSession, error) {
	return store.ConsoleSession{IDHash: h}, nil
}

// TestUsageSampler: one view starts the sampler, which goes on sampling
// the viewed org with no further view, every UsageEvery, keeping the
// points in order; once the viewer's session ends it forgets the org and
// stops; Close leaves no goroutine.
func TestUsageSampler(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	be := &statsBackend{}
	c, err := New(Options{Backend: be, Sessions: liveSessions{}, UsageEvery: 20 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := &session{ctx: t.Context(), who: Identity{Name: "t", Org: "acme"}}
	if got := c.viewUsage(s); len(got) != 1 || len(got[0].Points) != 1 {
		t.Fatalf("first view: %+v; want one sandbox with one sample", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.usageOf("acme")
		if len(got) == 1 && len(got[0].Points) >= 3 {
			for i, p := range got[0].Points {
				if p.CPU != float64(i+1) || p.MemLimit != 64<<20 {
					t.Errorf("point %d: %+v; want CPU %d, in order", i, p, i+1)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sampler took no samples without views: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	be.signedOut.Store(true)
	deadline = time.Now().Add(10 * time.Second)
	for c.usageOf("acme") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the sampler kept sampling as a signed-out session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// With no org left the sampler ends by itself.
	done := make(chan struct{})
	go func() { c.usage.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sampler runs on with nothing to sample")
	}
}

// TestUsageKeepsTheNewest: a series keeps the newest usageKeep samples;
// a sandbox missing from an answer loses its series.
func TestUsageKeepsTheNewest(t *testing.T) {
	t.Parallel()
	be := &statsBackend{}
	c, err := New(Options{Backend: be, Sessions: liveSessions{}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.usage.orgs["acme"] = &usageOrg{series: map[string]*usageSeries{"sandbox:sb-gone": {Kind: "sandbox", ID: "sb-gone"}}}
	for range usageKeep + 10 {
		c.takeUsage(t.Context(), "acme")
	}
	got := c.usageOf("acme")
	if len(got) != 1 || got[0].ID != "sb-1" {
		t.Fatalf("series %+v; want sb-1's alone", got)
	}
	if p := got[0].Points; len(p) != usageKeep || p[0].CPU != 11 || p[len(p)-1].CPU != usageKeep+10 {
		t.Errorf("%d points from CPU %v to %v; want the newest %d (11 to %d)", len(p), p[0].CPU, p[len(p)-1].CPU, usageKeep, usageKeep+10)
	}
}
