#!/usr/bin/env bash
# k8s-down.sh: stops what scripts/k8s-up.sh started, by the pids it recorded,
# then the containerd shims of its containerd, unmounts what the kubelet and
# containerd mounted under the state dir, and removes the CNI bridge it made.
# Keeps the state dir's certificates and the binaries (K8S_PURGE=1 removes the
# state dir too).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8S_CACHE:-$root/.cache/k8s}
state=${K8S_STATE:-$cache/state}
log() { echo "k8s-down: $*" >&2; }
[ -e "$state/pids" ] || { log "nothing recorded in $state/pids: not up"; exit 0; }

source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s.sh"
stop() { stop_recorded "$state/pids" "$1"; }

# The NetworkPolicy enforcer, and its chains and ipsets (k8s-netpol.sh).
K8S_STATE=$state K8S_CACHE=$cache "$root/scripts/k8s-netpol.sh" stop

# Pods first, while the kubelet runs: it stops their sandboxes, which tears
# down their network namespaces and bridge ports.
k="$cache/bin/kubectl --kubeconfig $state/admin.kubeconfig --request-timeout=10s"
if alive "$(pid_of "$state/pids" kubelet)" && alive "$(pid_of "$state/pids" kube-apiserver)"; then
	$k delete pods --all --all-namespaces --grace-period=5 --wait=true --timeout=60s >/dev/null 2>&1 ||
		log "warning: not every pod was deleted in 60 s"
fi
for n in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$n"; done

# Containers the kubelet left (if it died first), then containerd, the shims
# and gVisor processes serving it, the mounts under the state dir and the
# network namespaces of the tasks that were left.
teardown_containerd "$state/pids" "$state" "$state/containerd/runsc-root"
[ "$left" -eq 0 ] || log "warning: $left mounts left under $state"

# containerd 1.6 keeps shim sockets (hash-named) and ctr's fifos under
# /run/containerd whatever its state dir, and the Docker engine's shims use
# /run/containerd/s too: rmdir only, so a directory goes only when empty.
rmdir /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/s /run/containerd/fifo /run/containerd 2>/dev/null

if [ -e "$state/bridge" ]; then
	ip link del "$(cat "$state/bridge")" 2>/dev/null
	rm -f "$state/bridge"
fi
rm -f "$state/pids"
if [ -n "${K8S_PURGE:-}" ]; then
	rm -rf "$state"
elif [ "$left" -eq 0 ]; then
	# The next k8s-up starts from an empty cluster; certificates and logs stay.
	rm -rf "$state"/{etcd,kubelet,containerd,cni,pause.tar}
fi
log "down"
