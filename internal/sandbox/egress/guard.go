package egress

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"
)

// Guard re-checks a Network's rules on every Tick (the hub's reaper calls
// it) and says, through Err, whether sandboxes on the network may be
// called. When the rules are missing or altered (a `nft flush ruleset`, a
// firewall reload) or the host joined a network no rule drops yet, Tick
// logs it as an error and re-installs them at once: the hub is the only
// one that knows the rules, every sandbox on the network depends on them,
// and refusing until a restart would take every network sandbox down for
// what is usually a firewall tool's reload. Calls are refused (Err is set)
// from the moment a check fails until a re-install is read back; when the
// re-install fails (the hub lost CAP_NET_ADMIN, nft was removed) they stay
// refused, and each later Tick tries again.
type Guard struct {
	n   *Network
	log *zap.Logger

	mu  sync.Mutex
	err error
}

// NewGuard watches n; log may be nil.
func NewGuard(n *Network, log *zap.Logger) *Guard {
	if log == nil {
		log = zap.NewNop()
	}
	return &Guard{n: n, log: log.Named("egress")}
}

// Err is nil while the rules are in place, else why calls to sandboxes on
// the network are refused.
func (g *Guard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *Guard) set(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
}

// Tick checks the rules, and re-installs them when the check fails.
func (g *Guard) Tick(ctx context.Context) {
	err := g.n.Verify(ctx)
	if err == nil {
		if g.Err() != nil {
			g.log.Warn("sandbox egress rules are in place again; calls to network sandboxes are served",
				zap.String("network", g.n.Name), zap.String("table", "inet "+tableName(g.n.Bridge)))
		}
		g.set(nil)
		return
	}
	if ctx.Err() != nil {
		return // the hub is stopping; not the rules' fault
	}
	g.set(fmt.Errorf("the hub's egress rules for sandbox network %s are missing or altered (table inet %s flushed?): %w; calls to network sandboxes are refused until they are restored",
		g.n.Name, tableName(g.n.Bridge), err))
	g.log.Error("SANDBOX EGRESS RULES MISSING OR ALTERED: calls to network sandboxes are refused; re-installing them",
		zap.String("network", g.n.Name), zap.String("table", "inet "+tableName(g.n.Bridge)), zap.Error(err))
	if rerr := g.n.Reinstall(ctx); rerr != nil {
		g.set(fmt.Errorf("the hub's egress rules for sandbox network %s are missing or altered (table inet %s flushed?) and could not be re-installed: %w; calls to network sandboxes are refused until they are restored",
			g.n.Name, tableName(g.n.Bridge), rerr))
		g.log.Error("sandbox egress rules could not be re-installed; calls to network sandboxes stay refused (the next reaper tick tries again)",
			zap.String("network", g.n.Name), zap.Error(rerr))
		return
	}
	g.set(nil)
	g.log.Warn("sandbox egress rules re-installed; calls to network sandboxes are served again",
		zap.String("network", g.n.Name), zap.String("table", "inet "+tableName(g.n.Bridge)))
}
