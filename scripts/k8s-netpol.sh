#!/usr/bin/env bash
# k8s-netpol.sh build|start|stop: the NetworkPolicy enforcer of the local
# cluster (docs/kubernetes.md, "Network"): kube-router with only its firewall
# (iptables + ipset), built from tools/netpol and run as a host process.
#
#   build  builds kube-router and tools/netpol/cleanup into $K8S_CACHE/bin
#          (once: skipped while tools/netpol and this script are unchanged,
#          its own stamp .netpol-stamp; tools/k8s's stamp is not involved).
#   start  installs Debian's ipset if missing, builds, starts kube-router
#          against the cluster (pid in $K8S_STATE/netpol.pid, log in
#          $K8S_STATE/logs/netpol.log) and waits until its chains are in place.
#   stop   stops it (SIGTERM, SIGKILL after 15 s) and runs the cleanup, which
#          removes its KUBE-ROUTER-*, KUBE-NWPLCY-* and KUBE-POD-FW-* chains,
#          the jumps to them and its KUBE-SRC-*/KUBE-DST-* ipsets; nothing
#          else (kube-router's own --cleanup-config does not clean up in
#          v2.1.0, and it would touch the router's and proxy's state too).
#
# k8s-up.sh runs start (K8S_NETPOL=0 skips it), k8s-down.sh runs stop. Root.
# Environment: K8S_STATE, K8S_CACHE, K8S_SERVICE_CIDR as k8s-up.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8S_CACHE:-$root/.cache/k8s}
state=${K8S_STATE:-$cache/state}
svc_cidr=${K8S_SERVICE_CIDR:-10.214.0.0/24}
bin=$cache/bin
node=agentd-k8s
pidf=$state/netpol.pid
log() { echo "k8s-netpol: $*" >&2; }
die() { log "$*"; exit 1; }

build() {
	local mod=$root/tools/netpol stamp t0
	stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$mod"/*/main.go "$0" | sha256sum | cut -c1-16)
	[ "$(cat "$bin/.netpol-stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$bin/kube-router" ] && return 0
	mkdir -p "$bin"
	t0=$(date +%s)
	log "building kube-router (its firewall) into $bin (cold: ~5 min on 2 loaded cores)"
	(
		cd "$mod"
		export CGO_ENABLED=0
		go build -ldflags "-s -w" -o "$bin/kube-router.new" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
		go build -ldflags "-s -w" -o "$bin/netpol-cleanup.new" ./cleanup
	)
	mv "$bin/kube-router.new" "$bin/kube-router"
	mv "$bin/netpol-cleanup.new" "$bin/netpol-cleanup"
	echo "$stamp" >"$bin/.netpol-stamp"
	log "built in $(($(date +%s) - t0)) s"
}

running() { [ -e "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; }

start() {
	[ "$(id -u)" = 0 ] || die "must run as root (iptables, ipset)"
	running && { log "already running (pid $(cat "$pidf"))"; return 0; }
	for c in ipset iptables iptables-save iptables-restore; do
		command -v "$c" >/dev/null && continue
		log "installing Debian's ipset and iptables"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq ipset iptables >/dev/null 2>&1 ||
			{ apt-get update -qq && apt-get install -y -qq ipset iptables >/dev/null; } || die "could not install ipset"
		break
	done
	build
	mkdir -p "$state/logs"
	# Only the firewall: no routes, no BGP, no IPVS; no health or metrics
	# listener. The admin kubeconfig: it reads Pods, Namespaces, Nodes and
	# NetworkPolicies.
	"$bin/kube-router" --kubeconfig "$state/admin.kubeconfig" --hostname-override "$node" \
		--run-firewall --run-router=false --run-service-proxy=false --run-loadbalancer=false \
		--service-cluster-ip-range "$svc_cidr" --health-port 0 --metrics-port 0 \
		--iptables-sync-period 1m >>"$state/logs/netpol.log" 2>&1 &
	echo $! >"$pidf"
	local end=$(($(date +%s) + 60))
	while [ "$(date +%s)" -lt "$end" ]; do
		running || { tail -5 "$state/logs/netpol.log" >&2; rm -f "$pidf"; die "kube-router exited; see $state/logs/netpol.log"; }
		iptables -w -S FORWARD 2>/dev/null | grep -q -- '-j KUBE-ROUTER-FORWARD' && { log "enforcing NetworkPolicy (kube-router pid $(cat "$pidf"))"; return 0; }
		sleep 0.5
	done
	die "kube-router's chains are not in place after 60 s; see $state/logs/netpol.log"
}

stop() {
	if running; then
		local p i
		p=$(cat "$pidf")
		kill -TERM "$p" 2>/dev/null
		for ((i = 0; i < 30; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
		kill -0 "$p" 2>/dev/null && { log "kube-router ($p) ignored SIGTERM; killing"; kill -KILL "$p" 2>/dev/null; }
	fi
	rm -f "$pidf"
	# The cleanup only when something of kube-router's is there: it rewrites
	# the filter table (iptables-save, its own lines removed, iptables-restore).
	if iptables -w -S 2>/dev/null | grep -q -e 'KUBE-ROUTER-' -e 'KUBE-NWPLCY-' -e 'KUBE-POD-FW-' ||
		{ command -v ipset >/dev/null && ipset list -n 2>/dev/null | grep -q -e '^KUBE-SRC-' -e '^KUBE-DST-'; }; then
		[ -x "$bin/netpol-cleanup" ] || build
		"$bin/netpol-cleanup" -node "$node" -service-cidr "$svc_cidr" >>"$state/logs/netpol.log" 2>&1 ||
			log "warning: the cleanup failed; see $state/logs/netpol.log"
		if iptables -w -S 2>/dev/null | grep -q -e 'KUBE-ROUTER-' -e 'KUBE-NWPLCY-' -e 'KUBE-POD-FW-'; then
			log "warning: kube-router's chains are still there (iptables -S | grep KUBE-)"
		fi
	fi
	log "stopped"
}

case "${1:-}" in
build) build ;;
start) start ;;
stop) stop ;;
*) die "usage: k8s-netpol.sh build|start|stop" ;;
esac
