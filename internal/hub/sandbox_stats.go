package hub

import (
	"context"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/devdepot-ai/agentd/internal/hub/sandboxes"
	hubv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/hub/v1"
)

// SandboxStats samples the org's running and paused sandboxes that this
// replica drives, and its online machines (agentctl top); members may
// read it, as ListSandboxes.
func (v *environmentService) SandboxStats(ctx context.Context, req *hubv1.SandboxStatsRequest) (*hubv1.SandboxStatsResponse, error) {
	c, org, err := v.a.org(ctx, req.GetOrg())
	if err != nil {
		return nil, err
	}
	machines := make(chan []*hubv1.MachineUsage, 1) // asked meanwhile (their first samples wait too)
	go func() { machines <- v.machineUsage(ctx, c, org) }()
	resp := &hubv1.SandboxStatsResponse{Sampled: timestamppb.New(v.s.opts.Now())}
	m, err := v.sandboxes()
	if err != nil {
		resp.Machines = <-machines // a hub that runs no sandboxes still has machines
		return resp, nil
	}
	sbs, err := v.s.store.ListSandboxes(ctx, org.ID)
	if err != nil {
		return nil, storeError(err, "sandboxes")
	}
	us, err := m.Usage(ctx, sbs)
	if err != nil {
		return nil, err
	}
	for _, u := range us {
		sb := u.Sandbox
		conv := sb.Conversation
		if strings.HasPrefix(conv, sandboxes.ValidationConversation) {
			conv = "(validation)"
		}
		resp.Sandboxes = append(resp.Sandboxes, &hubv1.SandboxUsage{
			Id: sb.ID, Environment: sb.Environment, Conversation: conv, State: sb.State,
			CpuPercent:  u.CPUPercent,
			MemoryBytes: u.MemoryBytes, MemoryLimit: u.MemoryLimit,
			Pids: u.Pids, PidsLimit: u.PidsLimit,
			NetRxBytes: u.NetRxBytes, NetTxBytes: u.NetTxBytes,
			WorkspaceBytes: sb.WorkspaceBytes,
		})
	}
	resp.Machines = <-machines
	return resp, nil
}
