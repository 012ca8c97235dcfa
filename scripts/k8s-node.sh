#!/usr/bin/env bash
# k8s-node.sh add|remove NAME: a second node for the cluster of
# scripts/k8s-up.sh, on this same machine (docs/kubernetes.md, "A second
# node"), to test what a multi-node cluster changes for the sandbox driver.
#
#   add     a containerd of its own (root, state, socket, config; overlayfs;
#           runc only, no gVisor handler) with the images k8s-up imported
#           (its pause and agentd images, then K8S_IMAGES from the local
#           Docker engine), and a kubelet of its own (--root-dir, node name
#           NAME, its own cgroup root /NAME in every hierarchy so its kubepods
#           are not node 1's, its own pod log directory, its own CNI bridge,
#           subnet and config dir, a client certificate from the cluster's
#           CA) joining the running API server. The node registers with the
#           taint agentd.test/second-node=true:NoSchedule and the label
#           agentd.test/node=NAME, so only Pods that ask land on it.
#   remove  cordons it, deletes its Pods, stops its kubelet, deletes the Node
#           object, stops its containerd and the shims serving it (by pid),
#           unmounts what they mounted, removes its network namespaces,
#           bridge, cgroups and state directory: nothing left.
#
# No NetworkPolicy enforcer runs for it: a second kube-router in the same
# network namespace would delete the first one's chains. Its Pods' policies
# are accepted and ignored: give it network-none sandboxes only.
# Root only. Remove the node before scripts/k8s-down.sh.
#
# Environment: K8S_STATE, K8S_CACHE, K8S_IMAGES as k8s-up.sh (the cluster's
# state, whose CA signs the node's certificates); K8S_NODE_CIDR (the node's
# pod subnet, default 10.215.0.0/24: not node 1's 10.213.0.0/16 nor the
# services' 10.214.0.0/24), K8S_NODE_BRIDGE (default agentdk8sn0),
# K8S_NODE_HEALTHZ (the kubelet's healthz port on loopback, default 10268).
# Another node at once needs all three changed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8S_CACHE:-$root/.cache/k8s}
state=${K8S_STATE:-$cache/state}
images=${K8S_IMAGES-ghcr.io/devdepot-ai/sandbox-base:1 agentd-test/debian-slim:1}
bin=$cache/bin
cni_bin=/usr/lib/cni
taint=agentd.test/second-node

die() { echo "k8s-node: $*" >&2; exit 1; }
log() { echo "k8s-node: $*" >&2; }
[ $# -eq 2 ] || die "usage: $0 add|remove NAME"
action=$1 name=$2
[[ $name =~ ^[a-z0-9][a-z0-9-]{0,30}[a-z0-9]$ ]] || die "NAME $name: want a DNS label of at most 32 characters"
[ "$name" != agentd-k8s ] || die "agentd-k8s is node 1 (k8s-up.sh)"
[ "$(id -u)" = 0 ] || die "must run as root (cgroups, mounts, the bridge)"
nstate=$cache/nodes/$name
k="$bin/kubectl --kubeconfig $state/admin.kubeconfig --request-timeout=20s"
cgroups=(/sys/fs/cgroup/*/)

source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s.sh"
stop() { stop_recorded "$nstate/pids" "$1"; }

remove() {
	set +e
	[ -d "$nstate" ] || { log "$nstate does not exist: node $name is not here"; return 0; }
	local left
	if alive "$(pid_of "$nstate/pids" kubelet)"; then
		$k cordon "$name" >/dev/null 2>&1 || true
		# Its Pods, while its kubelet runs: it stops their sandboxes, which
		# tears down their network namespaces and bridge ports.
		$k delete pods --all-namespaces --field-selector "spec.nodeName=$name" --grace-period=5 --wait=true --timeout=60s >/dev/null 2>&1 ||
			log "warning: not every pod on $name was deleted in 60 s"
	fi
	stop kubelet
	# After the kubelet: a running one registers its Node again.
	$k delete node "$name" --ignore-not-found >/dev/null 2>&1 || log "warning: could not delete node $name"
	teardown_containerd "$nstate/pids" "$nstate"
	if [ -e "$nstate/bridge" ]; then ip link del "$(cat "$nstate/bridge")" 2>/dev/null; fi
	# Its cgroups, deepest first (the kubelet's kubepods tree under /NAME).
	for c in "${cgroups[@]}"; do
		[ -d "$c$name" ] || continue
		find "$c$name" -depth -type d -exec rmdir {} + 2>/dev/null
		[ -d "$c$name" ] && log "warning: cgroup $c$name left"
	done
	[ "$left" -eq 0 ] || die "$left mounts left under $nstate; not removing it"
	rm -rf "$nstate"
	rmdir "$cache/nodes" 2>/dev/null || true
	log "node $name removed"
}

add() {
	local cidr=${K8S_NODE_CIDR:-10.215.0.0/24} bridge=${K8S_NODE_BRIDGE:-agentdk8sn0} healthz=${K8S_NODE_HEALTHZ:-10268}
	local pki=$state/pki npki gw prefix sock snapshotter=overlayfs c
	[ -e "$state/pids" ] || die "no cluster: $state/pids is missing (make k8s-up first)"
	$k get --raw /readyz >/dev/null 2>&1 || die "the API server does not answer ($state/admin.kubeconfig)"
	[ -e "$nstate" ] && die "$nstate exists: node $name is up (or was not removed): $0 remove $name"
	ip link show "$bridge" >/dev/null 2>&1 && die "interface $bridge exists: set K8S_NODE_BRIDGE"
	for c in "${cgroups[@]}"; do [ -e "$c$name" ] && die "cgroup $c$name exists"; done
	gw=$(echo "$cidr" | awk -F'[./]' '{print $1"."$2"."$3"."$4+1}')
	prefix=${cidr#*/}
	if ip -4 -o addr | grep -q " $gw/"; then die "$gw is already an address here: set K8S_NODE_CIDR"; fi

	mkdir -p "$nstate"/{pki,logs,kubelet,containerd/root,containerd/state,cni/net.d,cni/ipam,pod-logs}
	chmod 700 "$nstate"
	: >"$nstate/pids"
	trap 'rc=$?; if [ $rc -ne 0 ]; then log "failed; removing what was made (logs were in $nstate/logs)"; cp -r "$nstate/logs" "$cache/nodes-$name-failed-logs" 2>/dev/null; remove; fi' EXIT

	# --- certificates from the cluster's CA: client and serving.
	npki=$nstate/pki
	cert() { # name cn org sans usage
		openssl genrsa -out "$npki/$1.key" 2048 2>/dev/null
		openssl req -new -key "$npki/$1.key" -subj "/CN=$2${3:+/O=$3}" -out "$npki/$1.csr" 2>/dev/null
		{
			echo "basicConstraints=CA:FALSE"
			echo "keyUsage=critical,digitalSignature,keyEncipherment"
			echo "extendedKeyUsage=$5"
			[ -n "$4" ] && echo "subjectAltName=$4"
		} >"$npki/$1.ext"
		openssl x509 -req -in "$npki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAserial "$npki/ca.srl" -CAcreateserial \
			-days 30 -extfile "$npki/$1.ext" -out "$npki/$1.crt" 2>/dev/null
		rm -f "$npki/$1.csr" "$npki/$1.ext"
	}
	cert kubelet "system:node:$name" system:nodes "" clientAuth
	cert kubelet-serving "system:node:$name" system:nodes "IP:$gw,DNS:$name" serverAuth
	sed -e "s#$pki/kubelet\.#$npki/kubelet.#g" "$state/kubelet.kubeconfig" >"$nstate/kubelet.kubeconfig"
	grep -q "$npki/kubelet.crt" "$nstate/kubelet.kubeconfig" || die "could not derive the node's kubeconfig from $state/kubelet.kubeconfig"

	start() { # name args...
		local n=$1
		shift
		"$@" >>"$nstate/logs/$n.log" 2>&1 &
		echo "$n $!" >>"$nstate/pids"
	}
	wait_for() { # what seconds command...
		local what=$1 end=$(($(date +%s) + $2)) n p
		shift 2
		while [ "$(date +%s)" -lt "$end" ]; do
			"$@" >/dev/null 2>&1 && return 0
			while read -r n p; do
				kill -0 "$p" 2>/dev/null && continue
				tail -3 "$nstate/logs/$n.log" >&2
				die "$n exited (waiting for $what); see $nstate/logs/$n.log"
			done <"$nstate/pids"
			sleep 0.5
		done
		die "$what not ready in time; see $nstate/logs"
	}

	# --- its bridge and CNI config.
	ip link add "$bridge" type bridge
	echo "$bridge" >"$nstate/bridge"
	ip addr add "$gw/$prefix" dev "$bridge"
	ip link set "$bridge" up
	cni_conflist "$nstate/cni/net.d/10-$name.conflist" "$name" "$bridge" "$nstate/cni/ipam" "$cidr" "$gw"

	# --- its cgroup root in every hierarchy (cpuset's needs cpus and mems).
	for c in "${cgroups[@]}"; do
		[ "$c" = /sys/fs/cgroup/unified/ ] && continue
		mkdir "$c$name"
		if [ -e "${c}cpuset.cpus" ]; then
			cat "${c}cpuset.cpus" >"$c$name/cpuset.cpus"
			cat "${c}cpuset.mems" >"$c$name/cpuset.mems"
		fi
	done

	# --- its containerd.
	sock=$nstate/containerd/containerd.sock
	cat >"$nstate/containerd/config.toml" <<TOML
version = 2
root = "$nstate/containerd/root"
state = "$nstate/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$nstate/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "agentd.local/pause:1"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snapshotter"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$nstate/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$nstate/cni/net.d"
    max_conf_num = 1
TOML
	start containerd containerd --config "$nstate/containerd/config.toml"
	local ctr="ctr --address $sock -n k8s.io" t0
	wait_for containerd 60 $ctr version

	# --- images: node 1's pause and agentd tarballs, K8S_IMAGES from Docker.
	t0=$(date +%s)
	for tar in "$state/pause.tar" "$state/agentd.tar"; do
		[ -e "$tar" ] || die "$tar is missing (k8s-up.sh makes it)"
		$ctr images import --snapshotter "$snapshotter" --no-unpack=false "$tar" >/dev/null
	done
	for img in $images; do
		if docker image inspect "$img" >/dev/null 2>&1; then
			log "importing $img from the local Docker engine"
			docker save "$img" | $ctr images import --snapshotter "$snapshotter" - >/dev/null
		else
			log "warning: $img is not in the local Docker engine; not imported"
		fi
	done
	log "images imported in $(($(date +%s) - t0)) s"

	# --- its kubelet.
	cat >"$nstate/kubelet/config.yaml" <<KCFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $gw
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $npki/kubelet-serving.crt
tlsPrivateKeyFile: $npki/kubelet-serving.key
cgroupDriver: cgroupfs
cgroupRoot: /$name
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
podLogsDir: $nstate/pod-logs
clusterDomain: cluster.local
resolvConf: ""
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
podPidsLimit: ${K8S_POD_PIDS:-512}
# Images here are imported, not pulled: a test's pull of one of them under
# another name (the same image id from a loopback registry) would otherwise
# leave a pull record that makes the kubelet refuse the imported name under
# pull policy Never (docs/kubernetes.md, Images and pulls).
imagePullCredentialsVerificationPolicy: NeverVerify
registerWithTaints:
- {key: $taint, value: "true", effect: NoSchedule}
KCFG
	t0=$(date +%s)
	start kubelet "$bin/kubelet" --config "$nstate/kubelet/config.yaml" --kubeconfig "$nstate/kubelet.kubeconfig" \
		--root-dir "$nstate/kubelet" --cert-dir "$nstate/kubelet/pki" --hostname-override "$name" --node-ip "$gw" \
		--node-labels "agentd.test/node=$name"
	wait_for "node $name" 120 $k get node "$name"
	wait_for "node $name Ready" 180 $k wait --for=condition=Ready "node/$name" --timeout=1s
	log "node $name Ready $(($(date +%s) - t0)) s after its kubelet started"
	trap - EXIT
	echo "node $name: taint $taint=true:NoSchedule, label agentd.test/node=$name; remove it with $0 remove $name"
}

case $action in
add) add ;;
remove) remove ;;
*) die "usage: $0 add|remove NAME" ;;
esac
