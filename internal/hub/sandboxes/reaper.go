package sandboxes

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// reap applies the lifecycle policy to conversations' sandboxes: idle for
// long enough, one is paused, then stopped (its /workspace kept), and
// removed only when a delete policy says so. Warm ones stay (a stale one
// is removed when claimed, or with its environment); agent runs are
// removed at the end of their TTL, busy or not, never for idling.
func (m *Manager) reap(ctx context.Context) {
	sbs, err := m.o.Store.ListSandboxes(ctx, "")
	if err != nil {
		return
	}
	now := m.o.Now()
	policies := map[string]policy{}
	for _, sb := range sbs {
		if sb.Hub != m.o.HubID || sb.Warm || strings.HasPrefix(sb.Conversation, ValidationConversation) {
			continue
		}
		m.mu.Lock()
		busy := m.active[sb.ID] > 0
		last := sb.LastUsedAt
		if t := m.used[sb.ID]; t.After(last) {
			last = t
		}
		m.mu.Unlock()
		if !sb.ExpiresAt.IsZero() {
			if !now.Before(sb.ExpiresAt) {
				m.destroy(ctx, sb, fmt.Sprintf("its TTL of %s ended", sb.ExpiresAt.Sub(sb.CreatedAt).Round(time.Second)))
			}
			continue
		}
		if busy {
			continue
		}
		key := sb.OrgID + "/" + sb.Environment
		p, ok := policies[key]
		if !ok {
			var err error
			if p, err = m.policy(ctx, sb.OrgID, sb.Environment); err != nil {
				// Not the hub's defaults instead: the environment's
				// own may say never. The next tick tries again.
				m.log.Warn("reading an environment's idle policy; its sandboxes wait for the next tick", zap.String("environment", sb.Environment), zap.Error(err))
				continue
			}
			policies[key] = p
		}
		idle := now.Sub(last)
		s, ok := p.due(stateOf(sb), idle)
		switch {
		case !ok:
		case s.to == "":
			m.deleteIdle(ctx, sb, "idle "+roughly(idle)+" (delete after "+roughly(s.after)+")", last)
		case s.to == store.SandboxArchived:
			why := "idle " + roughly(s.after)
			err := m.transition(ctx, sb, store.SandboxStopped, "stopped to be archived: "+why, last)
			if err == nil {
				err = m.archiveStopped(ctx, sb, why, last)
			}
			if err != nil {
				m.log.Warn("applying the idle policy", zap.String("sandbox", sb.ID), zap.String("to", s.to), zap.Error(err))
			}
		default:
			if err := m.transition(ctx, sb, s.to, "idle "+roughly(s.after), last); err != nil {
				m.log.Warn("applying the idle policy", zap.String("sandbox", sb.ID), zap.String("to", s.to), zap.Error(err))
			}
		}
	}
}

// reconcile runs at start: sandboxes whose containers are still there are
// kept (and started again if they stopped); containers nothing knows and
// rows without a container are removed.
func (m *Manager) reconcile(ctx context.Context) error { return m.findAgain(ctx, false) }

// findAgain is reconcile. Late (the hub serves calls already: the engine
// was unreachable at the start, or a removal failed since) it removes only
// containers no row knows, and starts again the stopped containers of
// rows; it leaves alone rows without their container listed, which may be
// being made meanwhile, and validations.
func (m *Manager) findAgain(ctx context.Context, late bool) (err error) {
	m.setFound(true) // a removal failing from now on clears it
	defer func() {
		if err != nil {
			m.setFound(false)
		}
	}()
	mine := map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: m.o.HubID}
	// Volumes first, rows after: a sandbox being made has its row before
	// its volume, so every volume listed here has its row listed below.
	vols, err := m.o.Driver.Volumes(ctx, mine)
	if err != nil {
		return err
	}
	infos, err := m.o.Driver.List(ctx, mine)
	if err != nil {
		return err
	}
	byID := map[string]sandbox.Info{}
	for _, in := range infos {
		byID[in.Labels[sandbox.LabelID]] = in
	}
	sbs, err := m.o.Store.ListSandboxes(ctx, "")
	if err != nil {
		return err
	}
	known, rows := map[string]bool{}, map[string]bool{}
	for _, sb := range sbs {
		if sb.Hub != m.o.HubID {
			continue
		}
		rows[sb.ID] = true
		in, ok := byID[sb.ID]
		switch {
		case stateOf(sb) == store.SandboxArchived:
			// Its workspace is in a verified archive. At the start, what
			// is left of its container and volume (the hub died before
			// it removed them) goes; late, a restore may be making them.
			if !late && (ok || hasVolume(vols, sb.ID)) {
				if err := m.o.Driver.Remove(ctx, "agentd-"+sb.ID); err != nil {
					m.log.Warn("removing an archived sandbox's container and volume", zap.String("sandbox", sb.ID), zap.Error(err))
					m.setFound(false)
				} else {
					m.log.Info("archived sandbox's container and volume removed", zap.String("sandbox", sb.ID))
				}
			}
		case late && (!ok || in.ID != sb.ContainerID || strings.HasPrefix(sb.Conversation, ValidationConversation)):
			// Maybe being made or validated now (its container listed
			// before it was made): kept. A lost one is removed by the
			// next call that finds it.
		case !ok && stateOf(sb) != store.SandboxRunning && !strings.HasPrefix(sb.Conversation, ValidationConversation) && hasVolume(vols, sb.ID):
			// Stopped or paused, and its container removed outside the
			// hub (docker container prune): its /workspace is kept, and
			// so is the row; a call says what to do.
			if sb.StateReason != containerGoneReason {
				m.setState(ctx, sb.ID, store.SandboxStopped, containerGoneReason)
			}
		case !ok || strings.HasPrefix(sb.Conversation, ValidationConversation):
			m.destroy(ctx, sb, "not found again after a restart")
			continue
		case in.State == sandbox.StateRunning || in.State == sandbox.StatePaused:
			// The container says what it is (a hub that died between a
			// transition and its record leaves them apart).
			if st := containerState(in); st != stateOf(sb) {
				m.setState(ctx, sb.ID, st, "found "+st+" after a restart")
			}
		case stateOf(sb) != store.SandboxRunning:
			// Stopped, or its container stopped while paused (the host
			// restarted): stopped, until a call or a person starts it.
			if stateOf(sb) != store.SandboxStopped {
				m.setState(ctx, sb.ID, store.SandboxStopped, "its container stopped while paused")
			}
		default:
			// Started again; if it cannot be (its runtime is not
			// registered yet after a reboot, …), stopped, /workspace
			// kept, until a call or a person starts it.
			err := m.offerKey(sb.ID)
			if err == nil {
				err = m.o.Driver.Start(ctx, in.ID)
			}
			if err != nil {
				m.log.Warn("a sandbox could not be started again; it is stopped, its workspace kept", zap.String("sandbox", sb.ID), zap.Error(err))
				m.setState(ctx, sb.ID, store.SandboxStopped, "could not be started again after a restart: "+err.Error())
			}
		}
		known[sb.ID] = true
	}
	for id, in := range byID {
		if !known[id] {
			if err := m.o.Driver.Remove(ctx, in.ID); err != nil {
				m.log.Warn("removing an orphaned sandbox", zap.String("container", in.ID), zap.Error(err))
				m.setFound(false)
			} else {
				m.log.Info("orphaned sandbox removed", zap.String("sandbox", id), zap.String("container", in.ID))
			}
		}
	}
	m.pruneVolumes(ctx, vols, byID, rows)
	if !late {
		m.dropUnrecorded(ctx, sbs)
	}
	m.log.Info("sandboxes found again", zap.Int("kept", len(known)), zap.Int("containers", len(infos)))
	return nil
}

// pruneVolumes removes the workspaces that lost their container and their
// row: what a removal leaves when the engine answered its first step but
// the answer was lost, or the engine went away between the two steps.
func (m *Manager) pruneVolumes(ctx context.Context, vols []sandbox.Volume, containers map[string]sandbox.Info, rows map[string]bool) {
	for _, v := range vols {
		id := v.Labels[sandbox.LabelID]
		if _, ok := containers[id]; ok || rows[id] {
			continue
		}
		if err := m.o.Driver.RemoveVolume(ctx, v.Name); err != nil {
			m.log.Warn("removing an orphaned workspace", zap.String("volume", v.Name), zap.Error(err))
			m.setFound(false)
			continue
		}
		m.log.Info("orphaned workspace removed", zap.String("sandbox", id), zap.String("volume", v.Name))
	}
}

// containerState is the state a running or paused container puts its row
// in.
func containerState(in sandbox.Info) string {
	if in.State == sandbox.StatePaused {
		return store.SandboxPaused
	}
	return store.SandboxRunning
}

func (m *Manager) setFound(v bool) {
	m.mu.Lock()
	m.found = v
	m.mu.Unlock()
}

// run is the background work: the idle reaper, and reconcile again until
// it succeeds.
func (m *Manager) run(ctx context.Context) {
	every := time.Minute
	for _, d := range []time.Duration{m.o.PauseAfter, m.o.StopAfter, m.o.ArchiveAfter, m.o.DeleteAfter} {
		if d > 0 {
			every = min(every, max(d/4, 100*time.Millisecond))
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.mu.Lock()
			found := m.found
			m.mu.Unlock()
			if !found {
				_ = m.findAgain(ctx, true) // logged at the start; calls say why meanwhile
			} else {
				m.sweep(ctx)
			}
			m.checkEgress(ctx)
			m.reap(ctx)
		}
	}
}

// containerGoneReason is the state reason of a stopped sandbox whose
// container was removed outside the hub while its /workspace volume stayed.
const containerGoneReason = "its container was removed outside the hub; /workspace is kept"

// hasVolume reports whether sandbox id's workspace volume is among vols.
func hasVolume(vols []sandbox.Volume, id string) bool {
	for _, v := range vols {
		if v.Labels[sandbox.LabelID] == id {
			return true
		}
	}
	return false
}

// deleteIdle removes a sandbox its delete policy ends, under its lock and
// only if it is still idle since idleSince: a call that woke it meanwhile
// keeps it, as a transition's does.
func (m *Manager) deleteIdle(ctx context.Context, sb store.Sandbox, why string, idleSince time.Time) {
	defer m.sbLock(sb.ID)()
	now, err := m.o.Store.Sandbox(ctx, sb.ID)
	if err != nil {
		return // gone already, or unreadable: the next tick looks again
	}
	m.mu.Lock()
	used, busy := m.used[sb.ID], m.active[sb.ID] > 0
	m.mu.Unlock()
	if busy || used.After(idleSince) || now.LastUsedAt.After(idleSince) {
		return
	}
	m.destroy(ctx, now, why)
}
