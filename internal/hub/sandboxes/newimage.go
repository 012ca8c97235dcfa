package sandboxes

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// whyNewImage is the state reason of a sandbox moved to its environment's
// new image.
const whyNewImage = "the environment's image changed"

// movable reports whether this replica can move sb, made from an image
// its environment no longer pins, onto the new one with its workspace:
// the move goes through the archive store (archive, then restore from
// the current pin), so it needs one, and sb must be this replica's.
// Otherwise sb keeps serving its old image: nothing is dropped for a
// newer one.
func (m *Manager) movable(sb store.Sandbox) bool {
	return m.o.Archive != nil && sb.Hub == m.o.HubID
}

// moveToNewImage brings sb onto env's current pin keeping /workspace:
// stopped (its processes end with the reason), archived and verified,
// then restored into a fresh container of the new image, as an archived
// sandbox's next call is. At every step the workspace is whole on the
// volume or in a verified archive (see archiveStopped). It returns the
// note of the call that caused it.
func (m *Manager) moveToNewImage(ctx context.Context, org store.Org, env envSpec, sb store.Sandbox) (string, error) {
	began := m.o.Now()
	old := sb.Image
	if st := stateOf(sb); st != store.SandboxStopped && st != store.SandboxArchived {
		if err := m.transition(ctx, sb, store.SandboxStopped, "stopped: "+whyNewImage, time.Time{}); err != nil {
			return "", err
		}
	}
	if stateOf(sb) != store.SandboxArchived {
		if err := m.archiveStopped(ctx, sb, whyNewImage, time.Time{}); err != nil {
			return "", err
		}
	}
	now, err := m.o.Store.Sandbox(ctx, sb.ID)
	if err != nil {
		return "", unavailable("sandbox "+sb.ID, err)
	}
	if _, err := m.restore(ctx, org, env, now); err != nil {
		return "", err
	}
	took := m.o.Now().Sub(began)
	m.log.Info("sandbox moved to its environment's new image", zap.String("sandbox", sb.ID), zap.String("from", old),
		zap.String("to", env.image), zap.Duration("took", took))
	return fmt.Sprintf("moved to the environment's new image in %d ms (/workspace kept)", took.Milliseconds()), nil
}

// newImagePending reports whether sb's next call moves it to its
// environment's new image (sandbox ls: "new image on next call").
func (m *Manager) newImagePending(ctx context.Context, sb store.Sandbox) bool {
	if sb.Warm || stateOf(sb) == store.SandboxArchived || !m.movable(sb) {
		return false
	}
	env, err := m.resolve(ctx, store.Org{ID: sb.OrgID}, sb.Environment)
	return err == nil && !m.current(sb, env)
}
