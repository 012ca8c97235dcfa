package sandboxes

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/hub/store"
	"github.com/devdepot-ai/agentd/internal/units"
)

// Defaults of what one org or token may run at once.
const (
	// DefaultOrgMaxSandboxes is --org-max-sandboxes' default.
	DefaultOrgMaxSandboxes = 20
	// DefaultTokenMaxSandboxes is --token-max-sandboxes' default: half
	// the org's, so that one token (one agent, one script) cannot take
	// all of an org's sandboxes.
	DefaultTokenMaxSandboxes = 10
	// defaultSandboxCPUs is the CPU limit a sandbox gets where the host
	// has enough CPUs to spare it.
	defaultSandboxCPUs = 2.0
)

// DefaultSandboxCPUs is the CPU limit a sandbox gets on a host with
// hostCPUs CPUs: 2, but never more than the host's CPUs minus one, so that
// one busy sandbox leaves the hub (and the other sandboxes) a CPU. On a
// host with a single CPU it is half of it.
func DefaultSandboxCPUs(hostCPUs int) float64 {
	return min(defaultSandboxCPUs, SpareCPUs(hostCPUs))
}

// SpareCPUs is the most CPUs a default gives one sandbox: the host's but
// one, or half of a single CPU.
func SpareCPUs(hostCPUs int) float64 {
	if hostCPUs <= 1 {
		return 0.5
	}
	return float64(hostCPUs - 1)
}

// CheckSandboxCPUs refuses a CPU limit the host cannot give: more than its
// CPUs, or none.
func CheckSandboxCPUs(cpus float64, hostCPUs int) error {
	switch {
	case !(cpus > 0):
		return fmt.Errorf("%g CPUs: want more than 0 (like 0.5 or 1)", cpus)
	case cpus > float64(hostCPUs):
		return fmt.Errorf("%g CPUs: this host has %d; give at most %d (the default, %g, leaves one to the hub)",
			cpus, hostCPUs, hostCPUs, DefaultSandboxCPUs(hostCPUs))
	}
	return nil
}

// counted reports whether a sandbox counts against the org's and the
// token's caps: every sandbox a call or a run asked for, not the warm pool
// (until a conversation claims it) nor the hub's own validation sandboxes,
// nor a stopped or archived one (it holds no CPU or memory; starting it again passes
// the caps).
func counted(sb store.Sandbox) bool {
	return !sb.Warm && !strings.HasPrefix(sb.Conversation, ValidationConversation) && stateOf(sb) != store.SandboxStopped && stateOf(sb) != store.SandboxArchived
}

// Admit refuses a new sandbox for the org when the caller's token (token
// "": none) or the org is at its cap, before a run fetches anything: see
// admit. The sandbox's creation counts again as it records it.
func (m *Manager) Admit(ctx context.Context, org store.Org, token string) error {
	return m.admit(ctx, org, token)
}

// admit refuses a new sandbox for the org (and the caller's token, when a
// token asked) when it has as many as its cap, with RESOURCE_EXHAUSTED
// naming the flag that sets it. It counts the store's sandboxes, every
// replica's. The caller holds m.quota while it counts and records the new
// sandbox, so that this replica's concurrent calls cannot both pass.
func (m *Manager) admit(ctx context.Context, org store.Org, token string) error {
	return m.admitN(ctx, org, token, 1)
}

// admitN is admit for n new sandboxes at once (a fork's): all fit under
// the caps, or none is let in.
func (m *Manager) admitN(ctx context.Context, org store.Org, token string, n int) error {
	if m.o.OrgMaxSandboxes <= 0 && m.o.TokenMaxSandboxes <= 0 {
		return nil
	}
	sbs, err := m.o.Store.ListSandboxes(ctx, org.ID)
	if err != nil {
		return unavailable("count the org's sandboxes", err)
	}
	var inOrg, ofToken int
	for _, sb := range sbs {
		if !counted(sb) {
			continue
		}
		inOrg++
		if token != "" && sb.Token == token {
			ofToken++
		}
	}
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" and %d new ones would make %d", n, inOrg+n)
	}
	if lim := m.o.OrgMaxSandboxes; lim > 0 && inOrg+n > lim {
		return fail(ErrQuota, errs.Exhausted,
			"org %s has %d sandboxes%s, the limit (--org-max-sandboxes %d); stop one (agentctl sandbox stop; stopped ones do not count) or an admin raises the limit; idle ones stop after --sandbox-stop-after",
			org.Name, inOrg, more, lim)
	}
	if n > 1 {
		more = fmt.Sprintf(" and %d new ones would make %d", n, ofToken+n)
	}
	if lim := m.o.TokenMaxSandboxes; lim > 0 && token != "" && ofToken+n > lim {
		return fail(ErrQuota, errs.Exhausted,
			"this API token has %d sandboxes in org %s%s, the limit (--token-max-sandboxes %d); stop one (agentctl sandbox stop; stopped ones do not count) or an admin raises the limit; idle ones stop after --sandbox-stop-after",
			ofToken, org.Name, more, lim)
	}
	return nil
}

// record registers a new sandbox's machine identity and stores its row,
// once admit lets it in (when it counts against the caps).
func (m *Manager) record(ctx context.Context, org store.Org, sb store.Sandbox, pub ed25519.PublicKey) (store.Sandbox, error) {
	if counted(sb) {
		m.quota.Lock()
		defer m.quota.Unlock() // until the row is in, or not
		if err := m.admit(ctx, org, sb.Token); err != nil {
			return store.Sandbox{}, err
		}
	}
	if _, err := m.o.Store.CreateMachine(ctx, store.Machine{ID: sb.ID, OrgID: org.ID, Name: sb.ID, Hostname: sb.ID, OS: "linux", Arch: "amd64",
		PublicKey: pub, CreatedAt: sb.CreatedAt}); err != nil {
		return store.Sandbox{}, unavailable("register sandbox", err)
	}
	out, err := m.o.Store.CreateSandbox(ctx, sb)
	if err != nil {
		_ = m.o.Store.RevokeMachine(context.WithoutCancel(ctx), org.ID, sb.ID, sb.CreatedAt)
		if errors.Is(err, store.ErrConflict) {
			return store.Sandbox{}, err
		}
		return store.Sandbox{}, unavailable("record sandbox", err)
	}
	return out, nil
}

// Bounds of an environment's own workspace size.
const (
	minWorkspaceMax = 64 << 20
	maxWorkspaceMax = 1 << 40
)

// CheckWorkspaceMax refuses an environment's workspace size the hub cannot
// carry out (too small for a filesystem, absurd, or a hub whose
// workspaces are unbounded), and returns it (0: the hub's).
func (m *Manager) CheckWorkspaceMax(n int64) (int64, error) {
	switch {
	case n == 0:
		return 0, nil
	case n < minWorkspaceMax || n > maxWorkspaceMax:
		return 0, errs.New(errs.Invalid, "workspace size %s: want %s to %s",
			units.Bytes(n), units.Bytes(minWorkspaceMax), units.Bytes(maxWorkspaceMax))
	case m.o.Limits.WorkspaceBytes == 0:
		return 0, errs.New(errs.Precondition,
			"this hub's workspaces are unbounded (agenthub serve --sandbox-workspace-max 0): it cannot bound one environment's")
	}
	return n, nil
}

// Workspace says what bounds an environment's /workspace whose own size
// is own (0: none): its size (0: unbounded) and what bounds it ("none":
// nothing).
func (m *Manager) Workspace(own int64) (maxBytes int64, bound string) {
	if m.o.Limits.WorkspaceBytes == 0 {
		return 0, "none"
	}
	maxBytes = m.o.Limits.WorkspaceBytes
	if own > 0 {
		maxBytes = own
	}
	return maxBytes, m.o.WorkspaceBound
}
