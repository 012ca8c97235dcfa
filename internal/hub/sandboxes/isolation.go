package sandboxes

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/errs"
	"github.com/devdepot-ai/agentd/internal/sandbox"
)

// ErrNoRuntime: the engine has not got the runtime an environment's
// isolation needs (gVisor without make sandbox-runtime); errs.Precondition.
// The sandbox is never made on another runtime instead.
var ErrNoRuntime = errors.New("the engine lacks the isolation's runtime")

// runtimeHinter is a driver that says itself what its engine lacks for a
// runtime (the Kubernetes driver: a RuntimeClass), where the Docker
// engine's remedy (make sandbox-runtime) does not apply.
type runtimeHinter interface {
	MissingRuntime(isolation, rt string) string
}

// runtimes is what the engine listed when last asked: read at Start and
// again whenever a sandbox needs one it did not list (make sandbox-runtime
// may have run meanwhile).
type runtimes struct {
	mu   sync.Mutex
	list map[string][]string // name → arguments
}

// readRuntimes asks the engine for its runtimes and remembers them.
func (m *Manager) readRuntimes(ctx context.Context) (map[string][]string, error) {
	list, err := m.o.Driver.Runtimes(ctx)
	if err != nil {
		return nil, err
	}
	m.rts.mu.Lock()
	m.rts.list = list
	m.rts.mu.Unlock()
	return list, nil
}

// CheckIsolation says whether the engine can run sandboxes of isolation
// on network ("public" or "none"): nil, or FAILED_PRECONDITION (ErrNoRuntime)
// naming what to run on the hub's host; INVALID for an unknown isolation.
func (m *Manager) CheckIsolation(ctx context.Context, isolation, network string) error {
	if !sandbox.ValidIsolation(isolation) {
		return errs.New(errs.Invalid, "isolation %q: want runc or gvisor", isolation)
	}
	net := "none"
	if network != "none" {
		net = m.o.PublicNetwork
	}
	return m.needRuntime(ctx, isolation, sandbox.RuntimeFor(isolation, net))
}

// needRuntime checks that the engine lists rt ("" is its default, always
// there), asking it again when the last list lacked it.
func (m *Manager) needRuntime(ctx context.Context, isolation, rt string) error {
	_, err := m.runtimeArgs(ctx, isolation, rt)
	return err
}

// runtimeArgs is needRuntime that also returns the arguments the engine
// runs rt with.
func (m *Manager) runtimeArgs(ctx context.Context, isolation, rt string) ([]string, error) {
	if rt == "" {
		return nil, nil
	}
	m.rts.mu.Lock()
	args, ok := m.rts.list[rt]
	m.rts.mu.Unlock()
	if ok {
		return args, nil
	}
	list, err := m.readRuntimes(ctx)
	if err != nil {
		return nil, EngineError(err, "the engine's runtimes")
	}
	if args, ok := list[rt]; ok {
		return args, nil
	}
	if d, ok := m.o.Driver.(runtimeHinter); ok {
		return nil, fail(ErrNoRuntime, errs.Precondition, "%s", d.MissingRuntime(isolation, rt))
	}
	return nil, fail(ErrNoRuntime, errs.Precondition,
		"isolation %s needs the runtime %s on the hub's Docker engine, which lists only %s: run 'make sandbox-runtime' as root on the hub's host (it never runs on runc instead)",
		isolation, rt, strings.Join(slices.Sorted(maps.Keys(list)), ", "))
}

// logRuntimes reads the engine's runtimes at start and says whether gVisor
// can run.
func (m *Manager) logRuntimes(ctx context.Context) {
	list, err := m.readRuntimes(ctx)
	if err != nil {
		m.log.Warn("reading the engine's runtimes", zap.Error(err))
		return
	}
	_, none := list[sandbox.RuntimeGVisor]
	_, net := list[sandbox.RuntimeGVisorNet]
	m.log.Info("engine runtimes", zap.Strings("runtimes", slices.Sorted(maps.Keys(list))), zap.Bool("gvisor", none && net),
		zap.String("gvisor_platform", sandbox.Platform(list[sandbox.RuntimeGVisor])))
}
