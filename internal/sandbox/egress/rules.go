package egress

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/devdepot-ai/agentd/internal/netblock"
)

// DefaultBlocked returns the IPv4 destinations no sandbox may reach: the
// IPv4 part of internal/netblock's list, which the egress proxy refuses
// too (private RFC 1918, link-local with the cloud metadata address,
// carrier-grade NAT, loopback, "this network", IETF protocol 192.0.0.0/24,
// benchmarking 198.18.0.0/15, multicast and reserved). A fresh slice on
// every call.
func DefaultBlocked() []netip.Prefix { return netblock.IPv4() }

// Names of the two chains in the table: the base chain on the prerouting
// hook, and the chain it jumps to for packets from the bridge.
const (
	chainHook   = "prerouting"
	chainEgress = "egress"
	// hookLine is the base chain's header as nft lists it; older nft
	// versions print the priority as a number (see normalize).
	hookLine = "type filter hook prerouting priority mangle; policy accept;"
)

// ruleset is everything Ensure installs for one bridge: the table and the
// rules of each chain, each written exactly as `nft list table` prints it,
// so that reading back is a comparison of lines.
type ruleset struct {
	table  string              // name of the inet table
	chains map[string][]string // chain name -> lines (header first)
}

// tableName is the inet table that holds one bridge's rules; one table per
// bridge, so a test's bridge never replaces the hub's.
func tableName(bridge string) string { return "agentd_" + bridge }

// ruleInput is what the rules are computed from.
type ruleInput struct {
	bridge   string
	subnet   netip.Prefix
	extra    []netip.Prefix
	allowDNS []netip.Addr
	allow    []netip.Prefix // private destinations an admin allows (IPv4)
	// from are private destinations allowed to one source address only
	// (a sandbox's on the network, from its environment's list).
	from map[netip.Addr][]netip.Prefix
	host []netip.Prefix // every address the host holds, with its on-link prefix length (any family)
}

// buildRules computes the ruleset for in; see the package comment for the
// order and the reasons.
func buildRules(in ruleInput) ruleset {
	blocked := DefaultBlocked()
	egress := []string{
		"meta nfproto ipv6 drop",
		"ct state established,related accept",
	}
	for _, a := range in.allowDNS {
		egress = append(egress,
			fmt.Sprintf("ip daddr %s udp dport 53 accept", a),
			fmt.Sprintf("ip daddr %s tcp dport 53 accept", a))
	}
	if len(in.allow) > 0 || len(in.from) > 0 {
		// Allowed private destinations, but never the host itself: its
		// own addresses are dropped first.
		egress = append(egress, "fib daddr type local drop")
		for _, p := range in.allow {
			egress = append(egress, "ip daddr "+prefixString(p.Masked())+" accept")
		}
		// Then each sandbox's own, matched by its source address.
		for _, src := range slices.SortedFunc(maps.Keys(in.from), netip.Addr.Compare) {
			for _, p := range in.from[src] {
				egress = append(egress, fmt.Sprintf("ip saddr %s ip daddr %s accept", src, prefixString(p.Masked())))
			}
		}
	}
	for _, p := range in.extra {
		p = p.Masked()
		if p.Addr().Is4() && !slices.Contains(blocked, p) {
			blocked = append(blocked, p)
		}
	}
	if !covered(blocked, in.subnet) {
		blocked = append(blocked, in.subnet.Masked())
	}
	// The host's on-link networks (a LAN that is not RFC 1918: the
	// neighbours), each once, and not where a blocked range or a wider
	// on-link network holds it.
	var host []netip.Prefix
	for _, p := range in.host {
		a := p.Addr().Unmap()
		if !a.Is4() {
			continue
		}
		bits := p.Bits()
		if p.Addr().Is4In6() {
			bits -= 96
		}
		if bits < 0 || bits > 32 {
			bits = 32
		}
		host = append(host, netip.PrefixFrom(a, bits).Masked())
	}
	slices.SortFunc(host, func(a, b netip.Prefix) int {
		if c := a.Bits() - b.Bits(); c != 0 {
			return c
		}
		return a.Addr().Compare(b.Addr())
	})
	for _, p := range slices.Compact(host) {
		if !covered(blocked, p) {
			blocked = append(blocked, p)
		}
	}
	for _, p := range blocked {
		egress = append(egress, "ip daddr "+prefixString(p)+" drop")
	}
	egress = append(egress, "fib daddr type local drop")
	return ruleset{
		table: tableName(in.bridge),
		chains: map[string][]string{
			chainHook:   {hookLine, fmt.Sprintf("iifname %q jump %s", in.bridge, chainEgress)},
			chainEgress: egress,
		},
	}
}

// covered reports whether some prefix in blocked holds all of p.
func covered(blocked []netip.Prefix, p netip.Prefix) bool {
	for _, b := range blocked {
		if b.Bits() <= p.Bits() && b.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// prefixString writes p as nft lists it: a /32 as a bare address.
func prefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// script is the nft transaction that replaces the table with rs: creating
// the table first makes the delete succeed when it does not exist yet, and
// nft applies the whole file atomically.
func (rs ruleset) script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\ntable inet %s {\n", rs.table, rs.table, rs.table)
	for _, name := range []string{chainHook, chainEgress} {
		fmt.Fprintf(&b, "\tchain %s {\n", name)
		for _, line := range rs.chains[name] {
			if line == hookLine {
				line = "type filter hook prerouting priority -150; policy accept;"
			}
			fmt.Fprintf(&b, "\t\t%s\n", line)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// removeScript deletes the table, and succeeds when it is already gone.
func removeScript(table string) string {
	return fmt.Sprintf("table inet %s\ndelete table inet %s\n", table, table)
}

// parseListing splits the output of `nft list table` into its chains:
// chain name -> lines, trimmed, blank lines and braces left out.
func parseListing(out string) (map[string][]string, error) {
	chains := map[string][]string{}
	var cur string
	inTable := false
	for raw := range strings.Lines(out) {
		line := strings.TrimSpace(raw)
		if i := strings.Index(line, " # handle "); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "":
		case strings.HasPrefix(line, "table ") && strings.HasSuffix(line, "{"):
			inTable = true
		case strings.HasPrefix(line, "chain ") && strings.HasSuffix(line, "{"):
			cur = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "chain "), "{"))
			chains[cur] = []string{}
		case line == "}":
			cur = ""
		case cur != "":
			chains[cur] = append(chains[cur], normalize(line))
		default:
			return nil, fmt.Errorf("unexpected line outside a chain: %q", line)
		}
	}
	if !inTable {
		return nil, fmt.Errorf("no table in nft output")
	}
	return chains, nil
}

// normalize turns what older nft versions print into the form we compare
// against.
func normalize(line string) string {
	return strings.Replace(line, "priority -150;", "priority mangle;", 1)
}

// problems compares a table read back with the ruleset and says, line by
// line, what is missing, what is there that should not be, and whether the
// order changed (an accept moved above a drop is a hole). Empty means equal.
func (rs ruleset) problems(got map[string][]string) []string {
	var out []string
	for _, name := range []string{chainHook, chainEgress} {
		want := rs.chains[name]
		have, ok := got[name]
		if !ok {
			out = append(out, fmt.Sprintf("chain %s is missing", name))
			continue
		}
		missing, unexpected := multisetDiff(want, have)
		for _, l := range missing {
			out = append(out, fmt.Sprintf("chain %s: missing %q", name, l))
		}
		for _, l := range unexpected {
			out = append(out, fmt.Sprintf("chain %s: unexpected %q", name, l))
		}
		if len(missing) == 0 && len(unexpected) == 0 && !slices.Equal(want, have) {
			out = append(out, fmt.Sprintf("chain %s: rules out of order", name))
		}
	}
	var extra []string
	for name := range got {
		if _, ok := rs.chains[name]; !ok {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		out = append(out, "unexpected chain "+name)
	}
	return out
}

// multisetDiff returns the lines of want not in have and of have not in
// want, counting repeats (a rule listed twice is one unexpected copy).
func multisetDiff(want, have []string) (missing, unexpected []string) {
	count := map[string]int{}
	for _, l := range have {
		count[l]++
	}
	for _, l := range want {
		if count[l] > 0 {
			count[l]--
		} else {
			missing = append(missing, l)
		}
	}
	for _, l := range have {
		if count[l] > 0 {
			count[l]--
			unexpected = append(unexpected, l)
		}
	}
	return missing, unexpected
}

// hostPrefixes returns every address on the host's interfaces with its
// on-link prefix length.
func hostPrefixes() ([]netip.Prefix, error) {
	hp, err := netblock.HostPrefixes()
	if err != nil {
		return nil, fmt.Errorf("list host addresses: %w", err)
	}
	out := make([]netip.Prefix, 0, len(hp))
	for _, p := range hp {
		out = append(out, p.Prefix)
	}
	return out, nil
}
