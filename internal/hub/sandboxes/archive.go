package sandboxes

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/archive"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/sandbox"
	"github.com/devdepot-ai/agentd/internal/units"
)

// Archived sandboxes. A stopped sandbox is archived by packing its
// /workspace (read from the stopped container through the engine: no
// agentd has to run) into the archive store, checking every blob of it
// again, recording the archive in its row, and only then removing its
// container and volume. Restore does the reverse into a fresh container of
// the environment's current image, and the row (its id, its conversation)
// is the same throughout. At every instant the workspace is whole on its
// volume or in a verified archive: a hub that dies before the record finds
// the sandbox stopped with its volume (the archive store collects the
// orphaned blobs); after it, its start removes what is left of the
// container and volume.

// ArchiveStore is what the manager asks of the archive store (package
// archive's *Store).
type ArchiveStore interface {
	Put(ctx context.Context, org, label string, r io.Reader) (*archive.Manifest, error)
	VerifyRest(ctx context.Context, m *archive.Manifest) error
	Restore(ctx context.Context, org, id string, w io.Writer) (*archive.Manifest, error)
	Delete(ctx context.Context, org, id string) error
	GC(ctx context.Context, org string) (archive.GCStats, error)
	Usage(ctx context.Context, org string) (int64, error)
	List(ctx context.Context, org string) ([]string, error)
	Get(ctx context.Context, org, id string) (*archive.Manifest, error)
}

var _ ArchiveStore = (*archive.Store)(nil)

// Archive and restore: a person's actions (agentctl sandbox archive |
// restore ID…).
const (
	ActionArchive = "archive"
	ActionRestore = "restore"
)

// DefaultArchiveAfter is the hub's default archive step: a week stopped.
const DefaultArchiveAfter = 7 * 24 * time.Hour

// DefaultOrgMaxArchive bounds what one org's archives take in the store
// (agenthub's --org-max-archive 50GB: 50 GiB, as sizes read there).
const DefaultOrgMaxArchive = 50 << 30

// Points of an archive at which Options.ArchiveHook is called (tests kill
// the hub there).
const (
	HookBeforeUpload = "before-upload" // the container stopped, nothing uploaded
	HookMidUpload    = "mid-upload"    // the first MiB of the workspace read
	HookUploaded     = "uploaded"      // the archive complete and verified, not recorded
	HookRecorded     = "recorded"      // recorded archived, the volume not yet removed
)

// errArchiveOff is the error of an archive on a hub without a store.
func errArchiveOff(id string) error {
	return errs.New(errs.Precondition, "sandbox %s: this hub keeps no archives (agenthub serve --archive-url); stop it instead", id)
}

// archiveStopped archives this replica's stopped sandbox. idleSince, when
// set, is the last use the idle policy decided on (see transition).
func (m *Manager) archiveStopped(ctx context.Context, sb store.Sandbox, why string, idleSince time.Time) error {
	if m.o.Archive == nil {
		return errArchiveOff(sb.ID)
	}
	defer m.sbLock(sb.ID)()
	now, err := m.o.Store.Sandbox(ctx, sb.ID)
	if err != nil {
		return unavailable("sandbox "+sb.ID, err)
	}
	sb = now
	switch {
	case stateOf(sb) == store.SandboxArchived:
		return nil
	case stateOf(sb) != store.SandboxStopped:
		return errs.New(errs.Precondition, "sandbox %s is %s again (a call woke it): it is not archived", sb.ID, stateOf(sb))
	case sb.Hub != m.o.HubID:
		return errs.New(errs.Unavailable, "sandbox %s is driven by another hub replica (%s): ask that replica to archive it", sb.ID, sb.Hub)
	case sb.ContainerID == "":
		return errs.New(errs.Precondition, "sandbox %s has no container", sb.ID)
	}
	if !idleSince.IsZero() {
		m.mu.Lock()
		used, busy := m.used[sb.ID], m.active[sb.ID] > 0
		m.mu.Unlock()
		if busy || used.After(idleSince) || sb.LastUsedAt.After(idleSince) {
			return nil
		}
	}
	if err := m.archiveQuota(ctx, sb, sb.WorkspaceBytes); err != nil {
		return err
	}
	began := m.o.Now()
	m.hook(HookBeforeUpload)
	man, how, err := m.putWorkspace(ctx, sb.OrgID, sb.ID, sb.ContainerID)
	if err != nil {
		return err
	}
	drop := func() {
		if err := m.o.Archive.Delete(context.WithoutCancel(ctx), sb.OrgID, man.ID); err != nil {
			m.log.Warn("deleting an archive that was not recorded", zap.String("sandbox", sb.ID), zap.String("archive", man.ID), zap.Error(err))
		}
	}
	if err := m.archiveQuota(ctx, sb, 0); err != nil {
		drop()
		return err
	}
	putTook, verifyAt := m.o.Now().Sub(began), m.o.Now()
	// Put read back every blob it uploaded; the rest (blobs the org had)
	// are read back here: every blob once before the volume goes.
	if err := m.o.Archive.VerifyRest(ctx, man); err != nil {
		drop()
		return archiveError(sb.ID, "verify the archive of", err)
	}
	verifyTook := m.o.Now().Sub(verifyAt)
	m.hook(HookUploaded)
	if err := m.o.Store.ArchiveSandbox(ctx, sb.ID, man.ID, m.o.Now(), why); err != nil {
		drop()
		return unavailable("record the archive of sandbox "+sb.ID, err)
	}
	m.hook(HookRecorded)
	m.dropBasis(sb.ID)
	m.setWorkspace(ctx, sb.ID, man.TotalBytes)
	m.o.Tunnels.CloseTunnel(sb.ID)
	// The workspace is archived and verified: the container and volume
	// go after this call returns (under the sandbox's lock, so before any
	// restore of it here), not on its path. With replicas another one may
	// restore it at once, and its lock is not this one: removed here
	// before the call returns.
	archiveID := man.ID
	if m.o.Replicas == nil {
		m.goFn(func(ctx context.Context) { m.removeArchived(ctx, sb.ID, archiveID) })
	} else {
		m.removeArchivedLocked(ctx, sb.ID, archiveID)
	}
	m.log.Info("sandbox archived", zap.String("sandbox", sb.ID), zap.String("archive", man.ID), zap.String("why", why),
		zap.Int64("bytes", man.TotalBytes), zap.Int64("new_bytes", man.NewBytes), zap.Duration("took", m.o.Now().Sub(began)),
		zap.String("read", how), zap.Duration("put_took", putTook), zap.Duration("verify_took", verifyTook))
	return nil
}

// removeArchived removes the container and volume of a sandbox archived
// as archiveID, unless a restore has brought it back meanwhile (that
// restore removed them itself before it made the new container). A
// failure, or a hub stopping first, leaves them to the next start's
// reconcile.
func (m *Manager) removeArchived(ctx context.Context, id, archiveID string) {
	defer m.sbLock(id)()
	m.removeArchivedLocked(ctx, id, archiveID)
}

// removeArchivedLocked is removeArchived under the sandbox's lock.
func (m *Manager) removeArchivedLocked(ctx context.Context, id, archiveID string) {
	sb, err := m.o.Store.Sandbox(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound): // removed (sandbox rm): nothing will make its container again
	case err != nil:
		m.setFound(false)
		return
	case stateOf(sb) != store.SandboxArchived || sb.ArchiveID != archiveID:
		return
	}
	if err := m.o.Driver.Remove(ctx, "agentd-"+id); err != nil {
		m.log.Warn("removing an archived sandbox's container and volume", zap.String("sandbox", id), zap.Error(err))
		m.setFound(false)
	}
}

// archiveQuota refuses an archive of sb (of about more bytes) that would
// take the org's archives past OrgMaxArchive.
func (m *Manager) archiveQuota(ctx context.Context, sb store.Sandbox, more int64) error {
	if m.o.OrgMaxArchive <= 0 {
		return nil
	}
	used, err := m.o.Archive.Usage(ctx, sb.OrgID)
	if err != nil {
		return archiveError(sb.ID, "archive", err)
	}
	if used+max(more, 0) > m.o.OrgMaxArchive {
		return fail(ErrQuota, errs.Exhausted,
			"sandbox %s not archived: the org's archives would take %s, past the limit of %s (--org-max-archive); the sandbox stays stopped with its workspace. Remove archived sandboxes (agentctl sandbox rm) or an admin raises the limit",
			sb.ID, units.Bytes(used+max(more, 0)), units.Bytes(m.o.OrgMaxArchive))
	}
	return nil
}

// archiveError is the caller's error for a failed archive step.
func archiveError(id, what string, err error) error {
	var ce *archive.CorruptError
	switch {
	case errors.As(err, &ce):
		return errs.New(errs.Precondition, "%s sandbox %s: %v; it stays as it was", what, id, err)
	case errs.KindOf(err) != errs.Unknown:
		return errs.Wrap(errs.KindOf(err), err, "%s sandbox %s", what, id)
	}
	return errs.New(errs.Unavailable, "%s sandbox %s: the archive store: %v", what, id, err)
}

// hook calls Options.ArchiveHook.
func (m *Manager) hook(point string) {
	if m.o.ArchiveHook != nil {
		m.o.ArchiveHook(point)
	}
}

// hookReader calls HookMidUpload once the first MiB went through it.
type hookReader struct {
	r    io.Reader
	m    *Manager
	n    int64
	done bool
}

func (h *hookReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.n += int64(n)
	if !h.done && h.n >= 1<<20 {
		h.done = true
		h.m.hook(HookMidUpload)
	}
	return n, err
}

// setWorkspace records what the workspace holds, logging a failure.
func (m *Manager) setWorkspace(ctx context.Context, id string, n int64) {
	if err := m.o.Store.SetSandboxWorkspace(ctx, id, n, m.o.Now()); err != nil {
		m.log.Warn("recording a sandbox's workspace size", zap.String("sandbox", id), zap.Error(err))
	}
}

// restore brings an archived sandbox back on this replica, whichever
// replica archived it: a fresh container of env's current image, the
// archive written into its volume (every file's sha256 checked against the
// manifest before anything runs), then started. It returns the state it
// came from ("" when it was not archived any more: the caller looks
// again). A restore that fails leaves it archived, the new container gone.
func (m *Manager) restore(ctx context.Context, org store.Org, env envSpec, sb store.Sandbox) (string, error) {
	if m.o.Archive == nil {
		return "", errArchiveOff(sb.ID)
	}
	defer m.hold(sb.ID)() // the reaper leaves it alone meanwhile
	defer m.sbLock(sb.ID)()
	now, err := m.o.Store.Sandbox(ctx, sb.ID)
	if err != nil {
		return "", unavailable("sandbox "+sb.ID, err)
	}
	sb = now
	if stateOf(sb) != store.SandboxArchived {
		return "", nil
	}
	network, err := m.network(env)
	if err != nil {
		return "", err
	}
	runtime := sandbox.RuntimeFor(env.isolation, network)
	runtimeArgs, err := m.runtimeArgs(ctx, env.isolation, runtime)
	if err != nil {
		return "", err
	}
	m.quota.Lock()
	err = m.admit(ctx, org, sb.Token)
	m.quota.Unlock()
	if err != nil {
		return "", err
	}
	// A new key, whichever replica had it: the seed is kept on the
	// replica that made the sandbox, and this one may be another.
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", errs.New(errs.Unknown, "sandbox key: %v", err)
	}
	if err := m.o.Store.ClaimArchivedSandbox(ctx, sb.ID, sb.Hub, m.o.HubID, pub); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return "", nil
		}
		return "", unavailable("claim sandbox "+sb.ID, err)
	}
	sb.Hub = m.o.HubID
	if err := m.saveKey(sb.ID, key.Seed()); err != nil {
		return "", unavailable("sandbox key", err)
	}
	// Whatever an earlier archive's removal or restore left on this
	// engine: the archive is the workspace now.
	if err := m.o.Driver.Remove(ctx, "agentd-"+sb.ID); err != nil {
		return "", EngineError(err, "restore sandbox "+sb.ID)
	}
	spec := m.spec(org, env, sb.ID, sb.Conversation, network, runtime, runtimeArgs)
	cid, err := m.createContainer(ctx, spec)
	if err != nil {
		return "", EngineError(err, fmt.Sprintf("environment %s failed to restore sandbox %s", env.name, sb.ID))
	}
	undo := func() {
		if err := m.o.Driver.Remove(context.WithoutCancel(ctx), cid); err != nil {
			m.log.Warn("removing a failed restore's container", zap.String("sandbox", sb.ID), zap.Error(err))
		}
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var restored *archive.Manifest
	go func() {
		man, err := m.o.Archive.Restore(ctx, sb.OrgID, sb.ArchiveID, pw)
		restored = man
		pw.CloseWithError(err) // nil: the tar ended, every file checked
		done <- err
	}()
	ierr := m.o.Driver.ImportWorkspace(ctx, cid, pr)
	pr.CloseWithError(errors.New("import ended"))
	rerr := <-done
	if rerr != nil || ierr != nil {
		undo()
		if rerr != nil {
			return "", archiveError(sb.ID, "restore", rerr)
		}
		return "", EngineError(ierr, "restore sandbox "+sb.ID)
	}
	// Nothing has written the volume since the import, and nothing will
	// before the start below: the next archive takes the files this
	// restore wrote, unchanged since now, as the manifest says.
	m.saveBasis(sb.ID, restored, time.Now())
	if err := m.o.Store.UnarchiveSandbox(ctx, sb.ID, cid, env.image, m.o.Now()); err != nil {
		undo()
		return "", unavailable("record the restore of sandbox "+sb.ID, err)
	}
	// The volume holds the whole workspace: the archive can go.
	m.deleteArchive(ctx, sb.OrgID, sb.ArchiveID)
	sb.ContainerID, sb.State, sb.ArchiveID, sb.Image = cid, store.SandboxRunning, "", env.image
	if err := m.o.Driver.Start(ctx, cid); err != nil {
		m.setState(context.WithoutCancel(ctx), sb.ID, store.SandboxStopped, "restored, but could not be started: "+err.Error())
		return "", EngineError(err, "start restored sandbox "+sb.ID)
	}
	if err := m.awaitOnline(ctx, sb); err != nil {
		return "", err
	}
	m.touch(sb.ID)
	return store.SandboxArchived, nil
}

// deleteArchive deletes an archive no row names any more, and collects the
// org's blobs no archive names (one replica at a time: gclease.go).
func (m *Manager) deleteArchive(ctx context.Context, orgID, id string) {
	if id == "" || m.o.Archive == nil {
		return
	}
	if err := m.o.Archive.Delete(context.WithoutCancel(ctx), orgID, id); err != nil {
		m.log.Warn("deleting an archive", zap.String("archive", id), zap.Error(err))
		return
	}
	m.goFn(func(ctx context.Context) { m.collect(ctx, orgID) }) // gclease.go
}

// dropUnrecorded deletes, at the start, the archives of this hub's
// sandboxes that no row records: what a hub that died between an
// archive's upload and its record left (the sandbox is stopped with its
// volume). Archives are labelled with their sandbox's id.
func (m *Manager) dropUnrecorded(ctx context.Context, sbs []store.Sandbox) {
	if m.o.Archive == nil {
		return
	}
	mine := map[string]store.Sandbox{}
	orgs := map[string]bool{}
	for _, sb := range sbs {
		if sb.Hub == m.o.HubID {
			mine[sb.ID] = sb
			orgs[sb.OrgID] = true
		}
	}
	for org := range orgs {
		ids, err := m.o.Archive.List(ctx, org)
		if err != nil {
			m.log.Warn("listing an org's archives", zap.String("org", org), zap.Error(err))
			continue
		}
		for _, id := range ids {
			man, err := m.o.Archive.Get(ctx, org, id)
			if err != nil {
				continue
			}
			if sb, ok := mine[man.Label]; ok && sb.OrgID == org && sb.ArchiveID != id {
				m.log.Info("deleting an archive no sandbox records (a hub died before its record)", zap.String("sandbox", sb.ID), zap.String("archive", id))
				m.deleteArchive(ctx, org, id)
			}
		}
	}
}
