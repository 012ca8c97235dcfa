package agentd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc/peer"

	"github.com/devdepot-ai/agentd/internal/activity"
	"github.com/devdepot-ai/agentd/internal/wire"
	"github.com/devdepot-ai/agentd/runner"
	"github.com/devdepot-ai/agentd/transport"
)

// A machine removed from its org must not keep running what the org
// started on it: when the hub refuses the tunnel as revoked (or no longer
// knows the machine), the daemon stops every command that came through the
// tunnel — TERM to its group, its kill grace, then KILL, as Signal does —
// and records each in the owner's audit log. What the owner started on the
// local socket (or any other direct listener) is never touched: the origin
// of a process is its connection's listener (see caller), not anything the
// call says.

// viaHub reports whether the call in ctx came through the tunnel to the hub.
func viaHub(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	c, ok := p.AuthInfo.(caller)
	return ok && c.hub
}

// hubProcesses are the running processes the hub started.
type hubProcesses struct {
	mu    sync.Mutex
	procs map[string]*runner.Process
}

func (h *hubProcesses) add(p *runner.Process) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.procs == nil {
		h.procs = map[string]*runner.Process{}
	}
	h.procs[p.ID()] = p
}

func (h *hubProcesses) remove(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.procs, id)
}

// list returns them, oldest id first.
func (h *hubProcesses) list() []*runner.Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := make([]*runner.Process, 0, len(h.procs))
	for _, p := range h.procs {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *runner.Process) int { return strings.Compare(a.ID(), b.ID()) })
	return ps
}

// stopHubProcesses stops every running process the hub started, each with
// SIGTERM, its kill grace, then SIGKILL, and records why in the audit log
// (its exit is recorded as for any process). It returns how many it
// signalled.
func (ps *processService) stopHubProcesses(why string) int {
	term, err := runner.ParseSignal("TERM")
	if err != nil {
		ps.log.Error("no TERM signal on this system", zap.Error(err))
		return 0
	}
	n := 0
	for _, p := range ps.hub.list() {
		r := activity.Record{
			Kind:     wire.KindProcessSignal,
			Summary:  fmt.Sprintf("sent TERM to %s, started through the hub: %s", p.ID(), why),
			Command:  commandLine(p.Info().Argv, p.Info().Command),
			ObjectID: p.ID(), Outcome: activity.OK,
		}
		err := p.Signal(term, 0) // grace: the one it was started with
		if err != nil {
			// Finished meanwhile (Precondition): nothing to stop.
			ps.hub.remove(p.ID())
			continue
		}
		n++
		ps.s.activity.Add(r)
	}
	return n
}

// hubRefused is told each time the hub refuses this machine's tunnel. A
// revoked or unknown machine no longer belongs to the org that started
// commands on it: they are stopped.
func (s *Server) hubRefused(err error) {
	if !errors.Is(err, transport.ErrRevoked) && !errors.Is(err, transport.ErrUnknownMachine) {
		return
	}
	if n := s.stopHubWork(err.Error()); n > 0 {
		s.log.Warn("stopped the commands the hub started on this machine", zap.Int("count", n), zap.Error(err))
	}
}

// stopHubWork stops the running commands the hub started (see
// stopHubProcesses) and returns how many it signalled.
func (s *Server) stopHubWork(why string) int {
	if s.procs == nil {
		return 0
	}
	return s.procs.stopHubProcesses(why)
}
