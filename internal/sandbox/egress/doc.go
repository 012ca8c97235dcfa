// Package egress gives the hub's sandboxes their network: the public
// internet yes, private networks and the host no.
//
// Ensure makes (or reuses, after checking its settings) a dedicated Docker
// bridge network with a Linux bridge named after the network (BridgeFor:
// agentd-sb0 for the default network, agsb-<hash> for others, so two hubs
// with two networks on one engine have two bridges and two tables; an
// existing network keeps the bridge it was made with) and inter-container traffic
// off, not `internal` (public egress must work), and installs the hub's own
// nftables rules for that bridge, then reads them back. Check reads them back
// again; the hub calls it at start and refuses to run sandboxes when Ensure
// or Check fails (fail closed). A Guard re-checks on every tick of the hub's
// reaper (Verify: also against on-link networks the host joined since),
// refuses calls to network sandboxes while the rules are missing, and
// re-installs them. `network none` remains the offline choice.
//
// Why our own nftables table and not Docker's DOCKER-USER chain:
// DOCKER-USER hangs off the filter FORWARD chain, so it sees only traffic the
// host routes onward, never traffic addressed to the host itself (the
// bridge's gateway, the host's public address, and whatever listens there,
// the hub and docker-proxy among them); and Docker rewrites its chains when
// it restarts. An `internal`
// network still reaches the gateway address. So the rules live in a table of
// ours (inet agentd_<bridge>), which Docker never touches, in a base chain on
// the prerouting hook: prerouting sees every packet that enters from the
// bridge, forwarded or local, before any routing decision and before Docker's
// DNAT (priority mangle, -150: after conntrack at -200, so ct state works,
// and before dstnat at -100, so the destination is the one the sandbox
// asked for). A drop in any base chain is final, so an accept that someone
// adds elsewhere (iptables or another table) cannot undo ours. Replacing the
// table is one nft transaction: no moment without rules, and running Ensure
// twice leaves exactly one copy of each rule. An iptables chain jumped to
// from mangle PREROUTING would filter the same packets; nftables was chosen
// for the atomic replace (iptables needs flush, refill and a jump check, with
// a gap in between), for a table that no other tool rewrites, and for the
// fib expression below.
//
// Rules, in order, for packets entering from the bridge (iifname, so they
// hold even before the bridge exists and after Docker recreates it):
//
//   - all IPv6 is dropped: the network is created without IPv6 (and a network
//     that has it is refused), so the only IPv6 a sandbox could send is
//     link-local, to the host or its neighbours. Dropping it all is simpler
//     and stricter than listing fc00::/7, fe80::/10 and ::1, and the host's
//     own IPv6 addresses are covered by the same rule;
//   - established and related traffic is accepted (replies, ICMP errors);
//   - DNS (udp and tcp port 53) to Options.AllowDNS is accepted: Docker's
//     embedded resolver forwards queries from the container's own namespace,
//     so a resolver in a private range (a VPC's, a home router) is blocked
//     unless it is listed;
//   - IPv4 destinations dropped: DefaultBlocked (internal/netblock's list,
//     which the egress proxy refuses too: RFC 1918, link-local with the
//     metadata address, CGNAT, loopback, 0/8, 192.0.0.0/24, 198.18.0.0/15,
//     multicast, reserved), Options.ExtraBlocked, the network's own subnet
//     when no blocked range covers it, and every on-link network of every
//     host interface (each address with its mask: a LAN that is not RFC
//     1918, and so its neighbours) that no blocked range covers; 172.16.0.0/12
//     holds Docker's subnets, so other sandboxes and the gateway are blocked
//     too;
//   - and `fib daddr type local` drops whatever the kernel would deliver to
//     the host itself, so an address the host gains after Ensure is blocked
//     as well.
//
// Inter-container traffic is off twice: Docker's enable_icc=false, and the
// bridge's own subnet is a blocked destination (where br_netfilter hands
// bridged frames to the IP hooks, as Docker arranges for icc=false).
//
// Not covered here: nftables rules do not survive a reboot, so after one the
// hub must run Ensure before any sandbox starts, and sandboxes must not carry
// a restart policy that would start them first.
package egress
