package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"sync"

	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// Defaults for the zero fields of Options.
const (
	DefaultNetworkName = "agentd-sandbox"
	// DefaultBridgeName is the bridge of DefaultNetworkName; other
	// networks get BridgeFor's.
	DefaultBridgeName = "agentd-sb0"
	DefaultSubnet     = "172.30.240.0/24"
)

// BridgeFor is the Linux bridge of a sandbox network: DefaultBridgeName for
// DefaultNetworkName (as every hub so far made it), and "agsb-" with ten hex
// digits of the name's SHA-256 for any other, so that two hubs on one engine
// with different networks get two bridges and two nft tables (agentd_<bridge>)
// and never replace each other's rules. Linux bridge names have at most 15
// bytes.
func BridgeFor(network string) string {
	if network == DefaultNetworkName {
		return DefaultBridgeName
	}
	sum := sha256.Sum256([]byte(network))
	return "agsb-" + hex.EncodeToString(sum[:5])
}

// LabelNetwork marks the Docker network Ensure created ("1").
const LabelNetwork = "ai.devdepot.agentd.sandbox.network"

// Errors from Ensure, Check and Remove, wrapped with context; match them with
// errors.Is. Any error from Ensure or Check means sandboxes must not start.
var (
	// ErrPermission: the process may not change or read the firewall.
	ErrPermission = errors.New("not permitted to manage firewall rules: run agenthub as root or with CAP_NET_ADMIN")
	// ErrNoNFT: the nft binary is not installed.
	ErrNoNFT = errors.New("nft not found: install the nftables package")
	// ErrRulesAltered: the rules read back are not the rules Ensure
	// installed (missing, changed, extra or reordered).
	ErrRulesAltered = errors.New("sandbox egress rules missing or altered")
	// ErrNetworkConflict: a Docker network of that name exists with other
	// settings; it is never changed or removed behind the operator's back.
	ErrNetworkConflict = errors.New("sandbox network exists with other settings")
	// ErrInvalidOptions: an Options field is malformed.
	ErrInvalidOptions = errors.New("invalid egress options")
)

// fix is what an operator should do when the rules are not in place.
const fix = "sandboxes are refused until Ensure succeeds again (run agenthub as root or with CAP_NET_ADMIN)"

// Options configure Ensure. Zero fields get the defaults documented on each.
type Options struct {
	// NetworkName is the Docker network sandboxes join. Default
	// DefaultNetworkName.
	NetworkName string
	// BridgeName is the Linux bridge device of that network, which the
	// rules match by name: letters, digits, '-' and '_', at most 15 bytes.
	// Default: the bridge of the existing network of that name, else
	// BridgeFor(NetworkName).
	BridgeName string
	// Subnet is the network's IPv4 subnet, /8 to /30; change it when it
	// clashes with a network the host already has. Default DefaultSubnet.
	Subnet netip.Prefix
	// DockerHost is the engine's address (unix:///var/run/docker.sock,
	// tcp://…). Default: DOCKER_HOST, else the engine's default socket.
	DockerHost string
	// ExtraBlocked are further destinations to drop, besides
	// DefaultBlocked and the host's addresses. IPv6 prefixes are accepted
	// and need no rule: all IPv6 from the bridge is dropped. Default none.
	ExtraBlocked []netip.Prefix
	// AllowDNS are IPv4 resolvers in blocked ranges that sandboxes may query
	// on port 53 (udp and tcp). Docker's embedded DNS forwards from inside
	// the sandbox's namespace, so without this a private resolver (the
	// host's, when /etc/resolv.conf names one) is unreachable. Default
	// none.
	AllowDNS []netip.Addr
	// AllowPrivate are private IPv4 destinations sandboxes may reach
	// (agenthub serve --egress-allow-private), accepted before the drops;
	// the host's own addresses stay dropped. Default none.
	AllowPrivate []netip.Prefix
	// Logger receives one line per install; named "egress" here. Default
	// a no-op logger.
	Logger *zap.Logger
	// NFT is the nft binary, a path or a name looked up in PATH. Default
	// "nft".
	NFT string
}

var bridgeNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,15}$`)

// withDefaults fills the zero fields and checks the others.
func (o Options) withDefaults() (Options, error) {
	if o.NetworkName == "" {
		o.NetworkName = DefaultNetworkName
	}
	if o.BridgeName == "" {
		o.BridgeName = BridgeFor(o.NetworkName)
	}
	if !o.Subnet.IsValid() {
		o.Subnet = netip.MustParsePrefix(DefaultSubnet)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.NFT == "" {
		o.NFT = "nft"
	}
	if !bridgeNameRE.MatchString(o.BridgeName) {
		return o, fmt.Errorf("%w: bridge name %q: want 1 to 15 letters, digits, '-' or '_'", ErrInvalidOptions, o.BridgeName)
	}
	if !o.Subnet.Addr().Is4() || o.Subnet.Bits() < 8 || o.Subnet.Bits() > 30 {
		return o, fmt.Errorf("%w: subnet %s: want an IPv4 prefix from /8 to /30", ErrInvalidOptions, o.Subnet)
	}
	o.Subnet = o.Subnet.Masked()
	for _, p := range o.ExtraBlocked {
		if !p.IsValid() {
			return o, fmt.Errorf("%w: extra blocked prefix %s", ErrInvalidOptions, p)
		}
	}
	for _, p := range o.AllowPrivate {
		if !p.IsValid() || !p.Addr().Unmap().Is4() || p.Bits() < 8 {
			return o, fmt.Errorf("%w: allowed private destination %s: want an IPv4 prefix of /8 or longer", ErrInvalidOptions, p)
		}
	}
	for _, a := range o.AllowDNS {
		if !a.Unmap().Is4() {
			return o, fmt.Errorf("%w: DNS server %s: want IPv4 (the sandbox network has no IPv6)", ErrInvalidOptions, a)
		}
	}
	return o, nil
}

// Network is the sandboxes' Docker network with its egress rules in place.
// Its methods may be called concurrently.
type Network struct {
	// Name and ID are the Docker network's.
	Name, ID string
	// Bridge is the Linux bridge device.
	Bridge string
	// Subnet and Gateway are the network's; the gateway is the host's
	// address on the bridge (and is blocked like every host address).
	Subnet  netip.Prefix
	Gateway netip.Addr

	dockerHost string
	nft        nft
	in         ruleInput // what the rules were built from, host prefixes aside

	inst  sync.Mutex // held across an install, so the last one wins with the latest sources
	mu    sync.Mutex
	rules ruleset                       // the rules installed last
	from  map[netip.Addr][]netip.Prefix // per-source accepts (AllowFrom)
}

// Ensure creates the sandbox network, or reuses it when its settings match,
// installs the egress rules for its bridge (replacing any earlier copy), and
// reads them back. The rules go in before the network is made, so no
// container on it ever runs without them. An error means sandboxes must not
// run with network access.
func Ensure(ctx context.Context, opts Options) (*Network, error) {
	bridgeGiven := opts.BridgeName != ""
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	path, err := exec.LookPath(o.NFT)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoNFT, err)
	}
	n := &Network{
		Name:       o.NetworkName,
		Subnet:     o.Subnet,
		dockerHost: o.DockerHost,
		nft:        nft{path: path},
	}
	cli, err := n.client()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	if !bridgeGiven {
		// A network made before bridges were named after networks keeps
		// its bridge: the rules follow the bridge it really has.
		// An engine that does not answer is reported by ensureNetwork,
		// after nft has had its say.
		if b := existingBridge(ctx, cli, o.NetworkName); b != "" && b != o.BridgeName && bridgeNameRE.MatchString(b) {
			o.Logger.Named("egress").Info("the sandbox network keeps the bridge it was made with",
				zap.String("network", o.NetworkName), zap.String("bridge", b), zap.String("new_networks_get", o.BridgeName))
			o.BridgeName = b
		}
	}
	n.Bridge = o.BridgeName
	n.in = ruleInput{bridge: o.BridgeName, subnet: o.Subnet, extra: o.ExtraBlocked, allowDNS: o.AllowDNS, allow: o.AllowPrivate}
	if err := n.install(ctx); err != nil {
		return nil, err
	}
	if n.ID, n.Gateway, err = ensureNetwork(ctx, cli, o); err != nil {
		return nil, err
	}
	if err := n.Check(ctx); err != nil {
		return nil, err
	}
	o.Logger.Named("egress").Info("sandbox egress rules installed",
		zap.String("network", n.Name),
		zap.String("bridge", n.Bridge),
		zap.Stringer("subnet", n.Subnet),
		zap.String("table", "inet "+n.rules.table),
		zap.Int("rules", len(n.rules.chains[chainEgress])))
	return n, nil
}

// want builds the rules for the host as it is now (its on-link networks
// change when an interface comes or goes).
func (n *Network) want() (ruleset, error) {
	host, err := hostPrefixes()
	if err != nil {
		return ruleset{}, err
	}
	in := n.in
	in.host = host
	n.mu.Lock()
	in.from = maps.Clone(n.from)
	n.mu.Unlock()
	return buildRules(in), nil
}

// install replaces the table with the rules for the host as it is now.
func (n *Network) install(ctx context.Context) error {
	n.inst.Lock()
	defer n.inst.Unlock()
	rs, err := n.want()
	if err != nil {
		return err
	}
	if _, err := n.nft.run(ctx, rs.script(), "-f", "-"); err != nil {
		return fmt.Errorf("install egress rules: %w", err)
	}
	n.mu.Lock()
	n.rules = rs
	n.mu.Unlock()
	return nil
}

// Verify is Check against the rules the host needs now: besides rules
// missing or altered since Ensure (the table flushed or deleted), it
// reports an on-link network the host joined since, which no rule drops
// yet. Reinstall fixes both.
func (n *Network) Verify(ctx context.Context) error {
	rs, err := n.want()
	if err != nil {
		return err
	}
	return n.check(ctx, rs)
}

// Reinstall installs the rules again (for the host as it is now) and reads
// them back.
func (n *Network) Reinstall(ctx context.Context) error {
	if err := n.install(ctx); err != nil {
		return err
	}
	return n.Check(ctx)
}

// Check reads the rules back and returns an error, wrapping
// ErrRulesAltered, that names every rule missing, changed, added or
// reordered since Ensure. The hub calls it at start (and may call it
// periodically) and refuses sandboxes while it fails.
func (n *Network) Check(ctx context.Context) error {
	n.mu.Lock()
	rs := n.rules
	n.mu.Unlock()
	return n.check(ctx, rs)
}

// check reads the table back and compares it with rs.
func (n *Network) check(ctx context.Context, rs ruleset) error {
	out, err := n.nft.run(ctx, "", "list", "table", "inet", rs.table)
	if errors.Is(err, errNoSuchObject) {
		return fmt.Errorf("%w: table inet %s does not exist; %s", ErrRulesAltered, rs.table, fix)
	}
	if err != nil {
		return fmt.Errorf("read egress rules: %w", err)
	}
	got, err := parseListing(out)
	if err != nil {
		return fmt.Errorf("%w: table inet %s: %v; %s", ErrRulesAltered, rs.table, err, fix)
	}
	if p := rs.problems(got); len(p) > 0 {
		return fmt.Errorf("%w: table inet %s: %s; %s", ErrRulesAltered, rs.table, strings.Join(p, "; "), fix)
	}
	return nil
}

// Remove deletes the egress rules (the whole table); the Docker network
// stays (see RemoveNetwork). Sandboxes still on the network then reach
// private addresses: remove them first. Removing what is gone is not an
// error.
func (n *Network) Remove(ctx context.Context) error {
	if _, err := n.nft.run(ctx, removeScript(tableName(n.Bridge)), "-f", "-"); err != nil {
		return fmt.Errorf("remove egress rules: %w", err)
	}
	return nil
}

// RemoveNetwork deletes the Docker network; the engine refuses while
// containers are attached. A network already gone is not an error.
func (n *Network) RemoveNetwork(ctx context.Context) error {
	cli, err := n.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove network %s: %w", n.Name, err)
	}
	return nil
}

// client opens the Docker engine client (API version negotiated).
func (n *Network) client() (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if n.dockerHost != "" {
		opts = append(opts, client.WithHost(n.dockerHost))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return cli, nil
}

// errNoSuchObject: nft found no such table or chain.
var errNoSuchObject = errors.New("no such object")

// nft runs the nft binary.
type nft struct{ path string }

// run runs nft with args and stdin, and returns its standard output. Its
// errors carry nft's own message and wrap ErrPermission or
// errNoSuchObject where they apply.
func (x nft) run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, x.path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	msg := strings.Join(strings.Fields(stderr.String()), " ")
	if msg == "" {
		msg = err.Error()
	}
	name := "nft " + strings.Join(args, " ")
	switch {
	case strings.Contains(msg, "Operation not permitted"):
		return "", fmt.Errorf("%s: %s: %w", name, msg, ErrPermission)
	case strings.Contains(msg, "No such file or directory"):
		return "", fmt.Errorf("%s: %s: %w", name, msg, errNoSuchObject)
	}
	return "", fmt.Errorf("%s: %s: %w", name, msg, err)
}
