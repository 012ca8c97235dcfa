package sandboxes

import (
	"context"
	"net/netip"
	"strings"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/egressproxy"
)

// EgressPrivate installs per-sandbox accepts in the sandbox network's
// kernel rules (package egress's Network.SyncContainers): container ID ->
// the private destinations its environment allows. The accepts become
// exactly want's; a container not running, gone or off the network gets
// none.
type EgressPrivate interface {
	SyncContainers(ctx context.Context, want map[string][]netip.Prefix) error
}

// syncPrivate brings the kernel accepts of this hub's sandboxes in line
// with their environments' --allow-private lists (addresses and CIDRs; host
// names are honoured by the egress proxy only). It runs when a sandbox
// starts or is removed and on every reaper tick, so a changed list, a
// restarted container (a new address) and a sandbox removed while the hub
// was down all settle within one tick. Errors are logged: the proxy path
// and the private-range drops stand either way, so a failure only
// withholds an allowance, never opens one.
func (m *Manager) syncPrivate(ctx context.Context) {
	if m.o.EgressPrivate == nil {
		return
	}
	m.privSync.Lock() // two interleaved syncs could install the older view last
	defer m.privSync.Unlock()
	want, err := m.privateWant(ctx)
	if err != nil {
		m.log.Warn("reading environments' private destinations for the kernel rules", zap.Error(err))
		return
	}
	if err := m.o.EgressPrivate.SyncContainers(ctx, want); err != nil && ctx.Err() == nil {
		m.log.Warn("installing environments' private destinations in the sandbox network's rules", zap.Error(err))
	}
}

// privateWant is container ID -> private prefixes for every sandbox this
// hub drives whose environment has network public and a list.
func (m *Manager) privateWant(ctx context.Context) (map[string][]netip.Prefix, error) {
	sbs, err := m.o.Store.ListSandboxes(ctx, "")
	if err != nil {
		return nil, err
	}
	type key struct{ org, env string }
	lists := map[key][]netip.Prefix{}
	want := map[string][]netip.Prefix{}
	for _, sb := range sbs {
		if sb.Hub != m.o.HubID || sb.ContainerID == "" || sb.Environment == "" ||
			sb.Environment == BuiltinEnvironment || strings.Contains(sb.Environment, ":") {
			continue
		}
		k := key{sb.OrgID, sb.Environment}
		l, ok := lists[k]
		if !ok {
			l = m.envPrivatePrefixes(ctx, sb.OrgID, sb.Environment)
			lists[k] = l
		}
		if len(l) > 0 {
			want[sb.ContainerID] = l
		}
	}
	return want, nil
}

// envPrivatePrefixes is the address and CIDR entries of a public-network
// environment's private destinations; none for network none or when they
// cannot be read (logged).
func (m *Manager) envPrivatePrefixes(ctx context.Context, orgID, env string) []netip.Prefix {
	e, err := m.o.Store.Environment(ctx, orgID, env)
	if err != nil || e.Network == "none" {
		return nil
	}
	l, err := m.o.Store.EnvironmentAllowPrivate(ctx, orgID, env)
	if err != nil || len(l) == 0 {
		return nil
	}
	a, err := egressproxy.ParsePrivateAllow(l)
	if err != nil {
		m.log.Warn("an environment's private destinations cannot be read", zap.String("environment", env), zap.Error(err))
		return nil
	}
	var out []netip.Prefix
	for _, p := range a.Prefixes {
		if p.Addr().Unmap().Is4() {
			out = append(out, p)
		}
	}
	return out
}
