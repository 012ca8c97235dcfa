package sandboxes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// Sandboxes across hub replicas. Each replica drives the Docker engine of
// its own host and names itself on what it makes with its hub ID: the
// labels of its containers and the hub column of their rows. Its replica
// ID in the registry starts with the hub ID (HUBID/r-…), so that any
// replica can tell whether a sandbox's replica is alive.
//
// A sandbox's tunnel is a machine's: it ends on the replica whose socket it
// dialled, and calls for it from other replicas are forwarded there. Only
// that replica touches its container; another replica that removes a
// sandbox (sandbox rm, an environment's new image) deletes its row and
// revokes it, and the owner, told by the revocation's broadcast (or its
// next sweep), removes the container. A call on replica B for a sandbox of
// replica A waits for A to bring it online (B asks A through the
// broadcast) and is forwarded; if A is not running, the call fails
// UNAVAILABLE saying so: the conversation's /workspace is on A's engine,
// and it never moves to a new sandbox unless the user removes the old one.

// ReplicaHubSep separates a sandbox replica's hub ID from the rest of its
// replica ID.
const ReplicaHubSep = "/"

// errLookAgain tells get that the conversation's sandbox changed under it
// (made or removed by another replica): look it up again.
var errLookAgain = errors.New("look again")

// DefaultHubID is the hub ID of the only hub on a store, derived from the
// store's secret (the same across its restarts); a replica must be given
// its own.
func DefaultHubID(secret []byte) string {
	sum := sha256.Sum256(append([]byte("sandbox-hub-id:"), secret...))
	return "hub-" + hex.EncodeToString(sum[:6])
}

// ValidHubID checks a sandbox hub ID: 1 to 40 letters, digits, '-', '_'
// and '.'.
func ValidHubID(id string) error {
	ok := id != "" && len(id) <= 40
	for _, c := range id {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}
	if !ok {
		return fmt.Errorf("hub: sandbox hub ID %q: want 1 to 40 letters, digits, '-', '_' and '.'", id)
	}
	return nil
}

// current reports whether the conversation's sandbox sb runs what env
// runs now. The built-in image's ID is each engine's own, so another
// replica's built-in sandbox is its replica's to judge.
func (m *Manager) current(sb store.Sandbox, env envSpec) bool {
	return sb.Image == env.image || (sb.Hub != m.o.HubID && env.name == BuiltinEnvironment)
}

// remote waits until the tunnel of sb, a sandbox another replica drives,
// is up there, asking that replica to bring it online, and returns its ID
// (the call is forwarded to it). errLookAgain if the sandbox was removed
// meanwhile; UNAVAILABLE if its replica is not running.
func (m *Manager) remote(ctx context.Context, sb store.Sandbox) (string, error) {
	if m.o.Replicas == nil {
		return "", m.ownerGone(sb)
	}
	wctx, cancel := context.WithTimeout(ctx, m.o.StartTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	asked := false
	for {
		// A paused or stopped sandbox may still have its tunnel listed
		// (frozen): it is online once its replica has woken it.
		r, err := m.o.Replicas.Lookup(wctx, sb.ID)
		switch {
		case err == nil && r.ReplicaID != m.o.Replicas.ReplicaID() && stateOf(sb) == store.SandboxRunning:
			return sb.ID, nil
		case err != nil && !errors.Is(err, store.ErrNotFound) && wctx.Err() == nil:
			return "", unavailable("route of sandbox "+sb.ID, err)
		}
		now, err := m.o.Store.Sandbox(wctx, sb.ID)
		if err == nil {
			sb.State = now.State
		}
		if errors.Is(err, store.ErrNotFound) || (err == nil && now.Hub != sb.Hub) {
			return "", errLookAgain
		}
		alive, aerr := m.hubAlive(wctx, sb.Hub)
		switch {
		case wctx.Err() != nil:
		case err != nil || aerr != nil:
			return "", unavailable("sandbox "+sb.ID, errors.Join(err, aerr))
		case !alive:
			return "", m.ownerGone(sb)
		case !asked:
			m.o.Ask(wctx, sb.ID)
			asked = true
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-wctx.Done():
			return "", fail(ErrReplicaDown, errs.Unavailable, "environment %s: sandbox %s, on hub replica %s, did not come online within %s; retry",
				sb.Environment, sb.ID, sb.Hub, m.o.StartTimeout)
		case <-tick.C:
		}
	}
}

// hubAlive reports whether a replica with the hub ID is registered (the
// replicas expire those that stop heartbeating).
func (m *Manager) hubAlive(ctx context.Context, hubID string) (bool, error) {
	rs, err := m.o.Store.ListReplicas(ctx)
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if strings.HasPrefix(r.ID, hubID+ReplicaHubSep) {
			return true, nil
		}
	}
	return false, nil
}

// ownerGone is the error of a call whose sandbox is on a replica that is
// not running.
func (m *Manager) ownerGone(sb store.Sandbox) error {
	return fail(ErrReplicaDown, errs.Unavailable,
		"conversation %q's sandbox %s (environment %s) is on hub replica %s, which is not running: %s. "+
			"Calls reach it again once that replica is back; or remove it with 'agentctl sandbox rm %s', and the conversation's next call starts a new sandbox (without that /workspace)",
		sb.Conversation, sb.ID, sb.Environment, sb.Hub, sandbox.TermsOf(m.o.Driver).Owned, sb.ID)
}

// destroyRemote removes a sandbox another replica drives, in the store: its
// identity is revoked and its row deleted; told so, its replica closes its
// tunnel and removes its container (or its next sweep, or its start does).
func (m *Manager) destroyRemote(ctx context.Context, sb store.Sandbox, why string) {
	if err := m.o.Store.RevokeMachine(ctx, sb.OrgID, sb.ID, m.o.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("revoking a sandbox's identity", zap.String("sandbox", sb.ID), zap.Error(err))
	}
	if err := m.o.Store.DeleteSandbox(ctx, sb.ID); err != nil {
		m.log.Warn("deleting a sandbox", zap.String("sandbox", sb.ID), zap.Error(err))
	}
	m.o.Revoke(ctx, sb.ID)
	m.log.Info("sandbox removed; its replica removes its container", zap.String("sandbox", sb.ID), zap.String("hub", sb.Hub),
		zap.String("environment", sb.Environment), zap.String("why", why))
}

// Asked brings online, in the background, this replica's sandbox id that
// another replica has a call for (the fleet heard it asked).
func (m *Manager) Asked(id string) {
	m.goFn(func(ctx context.Context) {
		sb, err := m.o.Store.Sandbox(ctx, id)
		if err != nil || sb.Hub != m.o.HubID || sb.Warm {
			return
		}
		if _, ok := m.o.Tunnels.Get(id); ok && stateOf(sb) == store.SandboxRunning {
			return
		}
		org, err := m.o.Store.Org(ctx, sb.OrgID)
		if err != nil {
			return
		}
		if _, err := m.Get(ctx, org, sb.Environment, sb.Conversation); err != nil && ctx.Err() == nil {
			m.log.Warn("bringing a sandbox online for another replica's call", zap.String("sandbox", id), zap.Error(err))
		}
	})
}

// RemoveGone removes, in the background, the container of this replica's
// sandbox id once its row is gone (another replica removed it and
// broadcast its revocation).
func (m *Manager) RemoveGone(id string) {
	m.goFn(func(ctx context.Context) {
		infos, err := m.o.Driver.List(ctx, map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: m.o.HubID, sandbox.LabelID: id})
		if err != nil || len(infos) == 0 {
			return
		}
		if _, err := m.o.Store.Sandbox(ctx, id); !errors.Is(err, store.ErrNotFound) {
			return
		}
		m.removeOrphans(ctx, infos, map[string]bool{}, "removed on another replica")
	})
}

// sweep removes this replica's containers whose rows are gone (removed by
// another replica while a broadcast was lost). Containers are listed
// before rows: a row is made before its container, so one listed without
// a row was removed.
func (m *Manager) sweep(ctx context.Context) {
	infos, err := m.o.Driver.List(ctx, map[string]string{sandbox.LabelManaged: "1", sandbox.LabelHub: m.o.HubID})
	if err != nil || len(infos) == 0 {
		return
	}
	sbs, err := m.o.Store.ListSandboxes(ctx, "")
	if err != nil {
		return
	}
	known := map[string]bool{}
	for _, sb := range sbs {
		known[sb.ID] = true
	}
	m.removeOrphans(ctx, infos, known, "its row is gone")
}

// removeOrphans removes the containers among infos whose sandbox is not
// known, with their workspaces.
func (m *Manager) removeOrphans(ctx context.Context, infos []sandbox.Info, known map[string]bool, why string) {
	for _, in := range infos {
		id := in.Labels[sandbox.LabelID]
		if known[id] {
			continue
		}
		m.o.Tunnels.CloseTunnel(id)
		if err := m.o.Driver.Remove(ctx, in.ID); err != nil {
			m.log.Warn("removing a container whose sandbox is gone", zap.String("sandbox", id), zap.String("why", why), zap.Error(err))
			continue
		}
		m.mu.Lock()
		delete(m.used, id)
		delete(m.stored, id)
		delete(m.egress, id)
		m.mu.Unlock()
		m.log.Info("sandbox container removed", zap.String("sandbox", id), zap.String("container", in.ID), zap.String("why", why))
	}
}

// createContainer creates the sandbox's container, first pulling its image
// by digest if the engine lacks it: a custom environment another replica
// validated (and pulled on its own engine).
//
// The engine's part of a Create is not cut short by ctx (a hub closing, a
// caller gone): an engine that received the request may still make the
// container after its client gave up, and a container made after the
// hub's clean-up would be left behind. Finished, it is removed by the
// caller's failure path like any other.
func (m *Manager) createContainer(ctx context.Context, spec sandbox.Spec) (string, error) {
	cid, err := m.engineCreate(ctx, spec)
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(spec.Image, "@sha256:") {
		return cid, err
	}
	if _, ierr := m.o.Driver.Image(ctx, spec.Image); !errors.Is(ierr, sandbox.ErrNotFound) {
		return cid, err // the image is there: something else is missing
	}
	m.log.Info("pulling a pinned image onto this replica's engine", zap.String("image", spec.Image))
	if _, err := m.o.Driver.Pull(ctx, spec.Image); err != nil {
		return "", fmt.Errorf("pull %s: %w", spec.Image, err)
	}
	return m.engineCreate(ctx, spec)
}

// engineCreate is Driver.Create, finished whatever becomes of ctx (within
// createTimeout).
func (m *Manager) engineCreate(ctx context.Context, spec sandbox.Spec) (string, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	return m.o.Driver.Create(cctx, spec)
}

// createTimeout bounds a container's creation (its volume, the volume's
// ownership, the container) when nothing else does.
const createTimeout = 2 * time.Minute
