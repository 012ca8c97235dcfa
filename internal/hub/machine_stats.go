package hub

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// machineStatsTimeout bounds asking one machine for its sample.
const machineStatsTimeout = 3 * time.Second

// machineSamples keeps each machine's last sample, for CPU % over the
// caller's interval (as the sandbox manager keeps its sandboxes').
type machineSamples struct {
	mu sync.Mutex
	m  map[string]*agentdv1.StatsResponse
}

// previous returns machine id's kept sample, if not older than keepFor,
// and keeps cur in its place.
func (s *machineSamples) previous(id string, cur *agentdv1.StatsResponse) (*agentdv1.StatsResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*agentdv1.StatsResponse{}
	}
	now := cur.GetSampled().AsTime()
	for k, v := range s.m {
		if now.Sub(v.GetSampled().AsTime()) > 10*time.Minute {
			delete(s.m, k)
		}
	}
	prev, ok := s.m[id]
	s.m[id] = cur
	return prev, ok
}

// machineUsage asks each online machine of org (through the hub's
// routing, as the caller c acting in org) what the commands its agentd
// started use; a machine with no earlier sample is asked again a second
// later, so CPU % is never a made-up 0. Offline machines are left out; one
// that does not answer in time is listed with the error.
func (s *Server) machineUsage(ctx context.Context, c *caller, org store.Org) []*hubv1.MachineUsage {
	ms, err := s.store.ListMachines(ctx, org.ID)
	if err != nil {
		return nil
	}
	acting := *c
	acting.org = org
	ctx = context.WithValue(ctx, callerKey{}, &acting)
	out := make([]*hubv1.MachineUsage, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if isSandboxID(m.ID) || !m.RevokedAt.IsZero() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s.sampleMachine(ctx, m)
		}()
	}
	wg.Wait()
	var list []*hubv1.MachineUsage
	for _, u := range out {
		if u != nil {
			list = append(list, u)
		}
	}
	return list
}

func (s *Server) sampleMachine(ctx context.Context, m store.Machine) *hubv1.MachineUsage {
	ask := func() (*agentdv1.StatsResponse, error) {
		ctx := metadata.NewIncomingContext(ctx, metadata.Pairs(wire.MDMachine, m.ID))
		r, err := s.route(ctx, "/agentd.v1.SystemService/Stats")
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, r.MD), machineStatsTimeout)
		defer cancel()
		resp, err := agentdv1.NewSystemServiceClient(r.Conn).Stats(ctx, &agentdv1.StatsRequest{})
		if r.Done != nil {
			err = r.Done(err)
		}
		return resp, err
	}
	u := &hubv1.MachineUsage{Id: m.ID, Name: m.Name}
	cur, err := ask()
	if rpcerr.Code(err) == codes.Unavailable { // offline: not listed
		return nil
	}
	if err != nil {
		u.Error = rpcerr.Message(err)
		return u
	}
	prev, ok := s.machineSamples.previous(m.ID, cur)
	if !ok {
		select {
		case <-time.After(firstMachineSampleGap):
		case <-ctx.Done():
			return nil
		}
		prev = cur
		if cur, err = ask(); err != nil {
			u.Error = rpcerr.Message(err)
			return u
		}
		s.machineSamples.previous(m.ID, cur)
	}
	if d := cur.GetSampled().AsTime().Sub(prev.GetSampled().AsTime()); d > 0 && cur.GetCpuNanos() >= prev.GetCpuNanos() {
		u.CpuPercent = float64(cur.GetCpuNanos()-prev.GetCpuNanos()) / float64(d.Nanoseconds()) * 100
	}
	u.MemoryBytes, u.Processes, u.Commands = cur.GetMemoryBytes(), cur.GetProcesses(), cur.GetCommands()
	u.Load1, u.Cpus = cur.GetLoad1(), cur.GetCpus()
	u.MemoryTotalBytes, u.MemoryAvailableBytes = cur.GetMemoryTotalBytes(), cur.GetMemoryAvailableBytes()
	return u
}

// firstMachineSampleGap is how long a machine's first sample waits for
// its second (docker stats's own interval, as for sandboxes).
const firstMachineSampleGap = time.Second
