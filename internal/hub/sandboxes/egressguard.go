package sandboxes

import (
	"context"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// EgressGuard re-checks the sandbox network's egress rules (package
// egress's Guard): Tick on every reaper tick checks them and re-installs
// them when they are missing; Err is nil while they are in place, else why
// calls to sandboxes on that network are refused.
type EgressGuard interface {
	Tick(ctx context.Context)
	Err() error
}

// checkEgress runs the guard's tick (the reaper calls it).
func (m *Manager) checkEgress(ctx context.Context) {
	if m.o.Egress != nil {
		m.o.Egress.Tick(ctx)
	}
	m.syncPrivate(ctx)
}

// egressRefusal is the FAILED_PRECONDITION a call to a network sandbox
// gets while the egress rules are missing, or nil.
func (m *Manager) egressRefusal() error {
	if m.o.Egress == nil {
		return nil
	}
	if err := m.o.Egress.Err(); err != nil {
		return fail(ErrEgress, errs.Precondition, "%s", err.Error())
	}
	return nil
}

// EgressRefusalFor is egressRefusal for a call to sandbox id, which only
// sandboxes with network access get (one on network none is served). It
// costs nothing while the rules are in place.
func (m *Manager) EgressRefusalFor(ctx context.Context, id string) error {
	err := m.egressRefusal()
	if err == nil {
		return nil
	}
	sb, serr := m.o.Store.Sandbox(ctx, id)
	if serr != nil {
		return err // unknown: refuse rather than guess
	}
	if sb.Environment == BuiltinEnvironment {
		if m.o.BuiltinNetwork == "none" {
			return nil
		}
		return err
	}
	if e, eerr := m.o.Store.Environment(ctx, sb.OrgID, sb.Environment); eerr == nil && e.Network == "none" {
		return nil
	}
	// An agent run's (no stored environment) or an older sandbox: the
	// network its container joined.
	if sb.ContainerID != "" {
		if info, ierr := m.o.Driver.Inspect(ctx, sb.ContainerID); ierr == nil && info.Labels[sandbox.LabelNetwork] == "none" {
			return nil
		}
	}
	return err
}
