package sandboxes

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/rpcerr"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// The manager's errors keep their message, give the caller the code their
// kind maps to, and match their sentinel.
func TestErrors(t *testing.T) {
	t.Parallel()
	engineDown := fmt.Errorf("docker: %w", sandbox.ErrUnavailable)
	for _, tc := range []struct {
		err      error
		msg      string
		code     codes.Code
		sentinel error
	}{
		{fail(ErrNotFound, errs.NotFound, "environment %s not found", "x"), "environment x not found", codes.NotFound, ErrNotFound},
		{fail(ErrNotReady, errs.Precondition, "environment %s is %s", "x", "rejected"), "environment x is rejected", codes.FailedPrecondition, ErrNotReady},
		{fail(ErrQuota, errs.Exhausted, "org %s has %d sandboxes", "o", 2), "org o has 2 sandboxes", codes.ResourceExhausted, ErrQuota},
		{fail(ErrReplicaDown, errs.Unavailable, "on %s", "r"), "on r", codes.Unavailable, ErrReplicaDown},
		{fail(ErrEgress, errs.Precondition, "%s", "rules 100% gone"), "rules 100% gone", codes.FailedPrecondition, ErrEgress},
		{EngineError(engineDown, "environment builtin"), "environment builtin: docker: container engine unavailable", codes.Unavailable, sandbox.ErrUnavailable},
		{EngineError(sandbox.ErrExhausted, "agent a"), "agent a: " + sandbox.ErrExhausted.Error(), codes.ResourceExhausted, sandbox.ErrExhausted},
		{EngineError(errors.New("no such image"), "agent a"), "agent a: no such image", codes.FailedPrecondition, nil},
		{unavailable("sandbox sb-1", errors.New("db down")), "sandbox sb-1: db down", codes.Unavailable, nil},
	} {
		if got := rpcerr.Message(tc.err); got != tc.msg {
			t.Errorf("message %q, want %q", got, tc.msg)
		}
		if got := rpcerr.Code(tc.err); got != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, got, tc.code)
		}
		if tc.sentinel != nil && !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%v does not match %v", tc.err, tc.sentinel)
		}
	}
}

// Workspace says what bounds an environment's /workspace.
func TestWorkspace(t *testing.T) {
	t.Parallel()
	m := &Manager{o: Options{WorkspaceBound: "ext4 on loop"}}
	if n, b := m.Workspace(1 << 30); n != 0 || b != "none" {
		t.Errorf("unbounded hub: %d %q, want 0 \"none\"", n, b)
	}
	if _, err := m.CheckWorkspaceMax(1 << 30); errs.KindOf(err) != errs.Precondition {
		t.Errorf("unbounded hub: CheckWorkspaceMax: %v, want a precondition", err)
	}
	m.o.Limits.WorkspaceBytes = 10 << 30
	if n, b := m.Workspace(0); n != 10<<30 || b != "ext4 on loop" {
		t.Errorf("the hub's: %d %q", n, b)
	}
	if n, _ := m.Workspace(1 << 30); n != 1<<30 {
		t.Errorf("its own: %d", n)
	}
	if _, err := m.CheckWorkspaceMax(1); errs.KindOf(err) != errs.Invalid {
		t.Errorf("CheckWorkspaceMax(1): %v, want invalid", err)
	}
}

// The hub ID derived from a store's secret is stable and valid.
func TestDefaultHubID(t *testing.T) {
	t.Parallel()
	a, b := DefaultHubID([]byte("s")), DefaultHubID([]byte("s"))
	if a != b || ValidHubID(a) != nil || a == DefaultHubID([]byte("t")) {
		t.Errorf("DefaultHubID: %q %q", a, b)
	}
}
