package drivertest

import (
	"testing"

	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// WorkspaceBound: a sandbox whose spec bounds its workspace
// (Limits.WorkspaceBytes) gets ENOSPC when it writes past the bound, not
// before half of it; the engine answers afterwards, and the workspace of a
// second sandbox of that bound is empty (the first's did not spill).
func (r *run) workspaceBound(t *testing.T) {
	if r.h.WorkspaceBytes <= 0 {
		t.Skip("the harness bounds no workspace (Harness.WorkspaceBytes)")
	}
	s := r.spec(t, FillWorkspace, nil)
	s.Limits.WorkspaceBytes = r.h.WorkspaceBytes
	sb := r.createSpec(t, s)
	if err := r.d.Start(t.Context(), sb.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	in := r.await(t, sb.id, "the write past the bound to end", func(in sandbox.Info) bool { return in.State == sandbox.StateExited })
	switch in.ExitCode {
	case 0:
	case 1:
		t.Errorf("a write of twice the workspace's bound (%d bytes) succeeded: the workspace is not bounded", r.h.WorkspaceBytes)
	default:
		t.Errorf("the write past the bound: exit %d (%s); want 0: ENOSPC after at least half the bound", in.ExitCode, in.Error)
	}
	if err := r.d.Ping(t.Context()); err != nil {
		t.Errorf("Ping after a full workspace: %v", err)
	}
	other := r.spec(t, WorkspaceOwned, nil)
	other.Limits.WorkspaceBytes = r.h.WorkspaceBytes
	ob := r.createSpec(t, other)
	if err := r.d.Start(t.Context(), ob.id); err != nil {
		t.Fatalf("Start a second bounded sandbox: %v", err)
	}
	if in := r.await(t, ob.id, "the second's check", func(in sandbox.Info) bool { return in.State == sandbox.StateExited }); in.ExitCode != 0 {
		t.Errorf("a second bounded workspace is not the sandbox user's: the check exited %d (%s)", in.ExitCode, in.Error)
	}
}
