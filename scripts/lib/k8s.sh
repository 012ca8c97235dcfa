# Shared by scripts/k8s-up.sh, k8s-node.sh and k8s-down.sh (sourced, not
# run): a node's CNI config, and stopping what a node's processes left
# behind. The caller defines log MESSAGE.

# pid_of PIDS NAME: the pid recorded for NAME in the file PIDS ("name pid"
# lines, as the scripts' start functions write them).
pid_of() { awk -v n="$2" '$1 == n {print $2}' "$1" 2>/dev/null; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# stop_recorded PIDS NAME: SIGTERM, then SIGKILL after 15 s.
stop_recorded() {
	local p i
	p=$(pid_of "$1" "$2")
	alive "$p" || return 0
	kill -TERM "$p" 2>/dev/null
	for ((i = 0; i < 30; i++)); do alive "$p" || return 0; sleep 0.5; done
	log "$2 ($p) ignored SIGTERM; killing"
	kill -KILL "$p" 2>/dev/null
}

# cni_conflist FILE NAME BRIDGE IPAM_DIR CIDR GATEWAY: a bridge network with
# host-local addresses, the node's address as the gateway (and a route to it
# alone: Pods reach nothing else through the bridge unless routed), and
# portmap.
cni_conflist() {
	cat >"$1" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "$2",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$3",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$4",
        "ranges": [[{"subnet": "$5", "gateway": "$6"}]],
        "routes": [{"dst": "$6/32"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
}

# teardown_containerd PIDS DIR [RUNSC_ROOT]: stops the containerd recorded in
# PIDS (its socket DIR/containerd/containerd.sock, its state under
# DIR/containerd) after killing its tasks, then kills the shims serving that
# socket (and gVisor's sandboxes and gofers under RUNSC_ROOT, which outlive a
# shim) by pid, unmounts everything under DIR deepest first, and removes the
# network namespaces of the tasks that were left. Sets left to the number of
# mounts still under DIR.
teardown_containerd() {
	local pids=$1 dir=$2 runsc=${3:-} sock=$2/containerd/containerd.sock
	local ctr="ctr --address $sock -n k8s.io" t netns f d cmd i m n
	local -a ms
	if alive "$(pid_of "$pids" containerd)"; then
		for t in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks kill -s KILL "$t" >/dev/null 2>&1; done
		sleep 1
	fi
	# Network namespaces of sandboxes whose tasks still exist (the kubelet
	# did not stop them, e.g. one that failed to start): removed last.
	netns=$(cat "$dir"/containerd/state/io.containerd.runtime.v2.task/k8s.io/*/config.json 2>/dev/null |
		grep -o '"/var/run/netns/cni-[0-9a-f-]*"' | tr -d '"' | sort -u)
	stop_recorded "$pids" containerd
	for f in $(grep -lsaF -e "$sock" ${runsc:+-e "$runsc/"} /proc/[0-9]*/cmdline); do
		d=${f%/cmdline}
		cmd=$( { tr '\0' ' ' <"$f"; } 2>/dev/null) || continue
		case "$cmd" in
		# runc's shims and gVisor's (containerd-shim-runsc-v1 -namespace k8s.io -address SOCK -id ID).
		*containerd-shim*"-address $sock "*) kill -KILL "${d#/proc/}" 2>/dev/null && log "killed shim ${d#/proc/}" ;;
		# gVisor's sandbox (runsc-sandbox) and gofer (runsc-gofer).
		*runsc*"--root=$runsc/"*) [ -n "$runsc" ] && kill -KILL "${d#/proc/}" 2>/dev/null && log "killed runsc ${d#/proc/}" ;;
		esac
	done
	# The kubelet's volumes, containerd's sandbox /dev/shm and rootfs.
	for i in 1 2 3; do
		mapfile -t ms < <(awk -v s="$dir/" 'index($2, s) == 1 {print $2}' /proc/self/mounts | sort -r)
		[ ${#ms[@]} -eq 0 ] && break
		for m in "${ms[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	done
	left=$(awk -v s="$dir/" 'index($2, s) == 1' /proc/self/mounts | wc -l)
	for n in $netns; do
		[ -e "$n" ] || continue
		umount "$n" 2>/dev/null
		rm -f "$n" && log "removed network namespace $n"
	done
}
