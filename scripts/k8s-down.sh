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

pid_of() { awk -v n="$1" '$1 == n {print $2}' "$state/pids"; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
stop() { # name: SIGTERM, then SIGKILL after 15 s
	local p i
	p=$(pid_of "$1")
	alive "$p" || return 0
	kill -TERM "$p" 2>/dev/null
	for ((i = 0; i < 30; i++)); do alive "$p" || return 0; sleep 0.5; done
	log "$1 ($p) ignored SIGTERM; killing"
	kill -KILL "$p" 2>/dev/null
}

# The NetworkPolicy enforcer, and its chains and ipsets (k8s-netpol.sh).
K8S_STATE=$state K8S_CACHE=$cache "$root/scripts/k8s-netpol.sh" stop

# Pods first, while the kubelet runs: it stops their sandboxes, which tears
# down their network namespaces and bridge ports.
k="$cache/bin/kubectl --kubeconfig $state/admin.kubeconfig --request-timeout=10s"
if alive "$(pid_of kubelet)" && alive "$(pid_of kube-apiserver)"; then
	$k delete pods --all --all-namespaces --grace-period=5 --wait=true --timeout=60s >/dev/null 2>&1 ||
		log "warning: not every pod was deleted in 60 s"
fi
for n in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$n"; done

# Containers the kubelet left (if it died first), then containerd, then the
# shims serving this containerd (found by its socket path, killed by pid).
sock=$state/containerd/containerd.sock
if alive "$(pid_of containerd)"; then
	ctr="ctr --address $sock -n k8s.io"
	for t in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks kill -s KILL "$t" >/dev/null 2>&1; done
	sleep 1
fi
# Network namespaces of sandboxes whose tasks still exist (the kubelet did not
# stop them, e.g. a sandbox that failed to start): unmounted after containerd.
netns=$(cat "$state"/containerd/state/io.containerd.runtime.v2.task/k8s.io/*/config.json 2>/dev/null |
	grep -o '"/var/run/netns/cni-[0-9a-f-]*"' | tr -d '"' | sort -u)
stop containerd
for f in $(grep -lsaF -e "$sock" -e "$state/containerd/runsc-root/" /proc/[0-9]*/cmdline); do
	d=${f%/cmdline}
	cmd=$( { tr '\0' ' ' <"$f"; } 2>/dev/null) || continue
	case "$cmd" in
	# runc's shims and gVisor's (containerd-shim-runsc-v1 -namespace k8s.io -address SOCK -id ID).
	*containerd-shim*"-address $sock "*) kill -KILL "${d#/proc/}" 2>/dev/null && log "killed shim ${d#/proc/}" ;;
	# gVisor's sandbox (runsc-sandbox) and gofer (runsc-gofer) outlive a
	# shim; they carry this state dir's runsc root (runsc.toml's root).
	*runsc*"--root=$state/containerd/runsc-root/"*) kill -KILL "${d#/proc/}" 2>/dev/null && log "killed runsc ${d#/proc/}" ;;
	esac
done

# Mounts under the state dir (the kubelet's volumes, containerd's sandbox
# /dev/shm and rootfs), deepest first.
for i in 1 2 3; do
	mapfile -t ms < <(awk -v s="$state/" 'index($2, s) == 1 {print $2}' /proc/self/mounts | sort -r)
	[ ${#ms[@]} -eq 0 ] && break
	for m in "${ms[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done
left=$(awk -v s="$state/" 'index($2, s) == 1' /proc/self/mounts | wc -l)
[ "$left" -eq 0 ] || log "warning: $left mounts left under $state"

for n in $netns; do
	[ -e "$n" ] || continue
	umount "$n" 2>/dev/null
	rm -f "$n" && log "removed network namespace $n"
done

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
