package hub

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/devdepot-ai/agentd/internal/hub/machinetop"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/wire"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// machineUsage is top's rows of org's paired machines, each asked for
// SystemService.Stats through route as c acting in org.
func (v *environmentService) machineUsage(ctx context.Context, c *caller, org store.Org) (out []*hubv1.MachineUsage) {
	ms, err := v.s.store.ListMachines(ctx, org.ID)
	var list []machinetop.Machine
	for _, m := range ms {
		if err == nil && !isSandboxID(m.ID) && m.RevokedAt.IsZero() {
			list = append(list, machinetop.Machine{ID: m.ID, Name: m.Name})
		}
	}
	acting := *c
	acting.org = org
	ctx = context.WithValue(ctx, callerKey{}, &acting)
	for _, r := range v.top.Rows(ctx, list, func(ctx context.Context, id string) (machinetop.Sample, error) {
		r, err := v.s.route(metadata.NewIncomingContext(ctx, metadata.Pairs(wire.MDMachine, id)), "/agentd.v1.SystemService/Stats")
		if rpcerr.Code(err) == codes.Unavailable {
			return machinetop.Sample{}, machinetop.ErrOffline
		} else if err != nil {
			return machinetop.Sample{}, err
		}
		s, err := agentdv1.NewSystemServiceClient(r.Conn).Stats(metadata.NewOutgoingContext(ctx, r.MD), &agentdv1.StatsRequest{})
		if r.Done != nil {
			err = r.Done(err)
		}
		return machinetop.Sample{At: s.GetSampled().AsTime(), CPUNanos: s.GetCpuNanos(), MemoryBytes: s.GetMemoryBytes(), Processes: s.GetProcesses(),
			Commands: s.GetCommands(), Load1: s.GetLoad1(), CPUs: s.GetCpus(), MemoryTotal: s.GetMemoryTotalBytes(), MemoryAvailable: s.GetMemoryAvailableBytes()}, err
	}) {
		out = append(out, &hubv1.MachineUsage{Id: r.ID, Name: r.Name, Error: r.Err, CpuPercent: r.CPUPercent, MemoryBytes: r.MemoryBytes,
			Processes: r.Processes, Commands: r.Commands, Load1: r.Load1, Cpus: r.CPUs, MemoryTotalBytes: r.MemoryTotal, MemoryAvailableBytes: r.MemoryAvailable})
	}
	return out
}
