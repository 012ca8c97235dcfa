#!/usr/bin/env bash
# k8s-up.sh: a real single-node Kubernetes cluster on this machine, for
# developing and testing the Kubernetes sandbox driver (docs/kubernetes.md).
#
# Builds (or reuses) kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet, kubectl and etcd from tools/k8s into $K8S_CACHE/bin, then starts
# them plus a second containerd (Debian's, its own root/state/socket; never the
# Docker engine's) under $K8S_STATE. Everything listens on loopback, except the
# kubelet, which listens on the private CNI bridge's address (a kubelet refuses
# a loopback node IP). Ends by printing one line to paste:
#   export KUBECONFIG=… PATH=…:$PATH
# Root only (cgroups, mounts, the bridge). Stop it with scripts/k8s-down.sh.
#
# Environment: K8S_STATE (default .cache/k8s/state), K8S_CACHE (.cache/k8s),
# K8S_IMAGES (images to copy from the local Docker engine; default
# ghcr.io/devdepot-ai/sandbox-base:1 and the tests' agentd-test/debian-slim:1), K8S_GVISOR=0 (do not build
# gVisor's runsc and shim from tools/gvisor, nor register handler runsc and
# RuntimeClass gvisor; the default builds them once), K8S_POD_CIDR (10.213.0.0/16),
# K8S_SERVICE_CIDR (10.214.0.0/24), K8S_POD_PIDS (the kubelet's podPidsLimit,
# 512: the sandbox driver refuses nodes without one), K8S_API_PORT (16443), K8S_ETCD_PORT (23790),
# K8S_REUSE_BIN=1 (keep binaries already in $K8S_CACHE/bin, e.g. copied from
# another checkout built at the same versions, instead of rebuilding them),
# K8S_NETPOL=0 (no NetworkPolicy enforcer: scripts/k8s-netpol.sh is not
# started, and policies are accepted and ignored, as the bridge CNI does).
# K8S_AGENTD_IMAGE (the name of the agentd image built from this checkout and
# imported, for agenthub's --kube-agentd-image; default
# agentd.local/agentd:VERSION, VERSION as the Makefile's),
# K8S_SNAPSHOTTER (the second containerd's snapshotter: overlayfs, the
# default, or native, which copies an image's whole tree for every container:
# 30-90 s a Pod for the 449 MB sandbox image on a loaded machine).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8S_CACHE:-$root/.cache/k8s}
state=${K8S_STATE:-$cache/state}
images=${K8S_IMAGES-ghcr.io/devdepot-ai/sandbox-base:1 agentd-test/debian-slim:1}
pod_cidr=${K8S_POD_CIDR:-10.213.0.0/16}
svc_cidr=${K8S_SERVICE_CIDR:-10.214.0.0/24}
api_port=${K8S_API_PORT:-16443}
etcd_port=${K8S_ETCD_PORT:-23790}
etcd_peer=$((etcd_port + 10))
bridge=${K8S_BRIDGE:-agentdk8s0}
node=agentd-k8s
snapshotter=${K8S_SNAPSHOTTER:-overlayfs}
case $snapshotter in overlayfs | native) ;; *) echo "k8s-up: K8S_SNAPSHOTTER=$snapshotter: want overlayfs or native" >&2; exit 2 ;; esac
pause_image=agentd.local/pause:1
version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)
agentd_image=${K8S_AGENTD_IMAGE:-agentd.local/agentd:$version}

die() { echo "k8s-up: $*" >&2; exit 1; }
log() { echo "k8s-up: $*" >&2; }
source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s.sh"
[ "$(id -u)" = 0 ] || die "must run as root (cgroups, mounts, the CNI bridge)"
[ -e "$state/pids" ] && die "$state/pids exists: a cluster is up (or was not stopped); run scripts/k8s-down.sh first"
cni_bin=/usr/lib/cni
need=()
for c in containerd:containerd ctr:containerd containerd-shim-runc-v2:containerd runc:runc openssl:openssl ip:iproute2; do
	command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
done
[ -x "$cni_bin/bridge" ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
	log "installing Debian packages: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; } ||
		die "could not install ${need[*]}"
fi
for c in containerd ctr containerd-shim-runc-v2 runc openssl ip "$cni_bin/bridge"; do
	command -v "$c" >/dev/null || die "$c not found after installing packages"
done

# --- the binaries: built from tools/k8s (once; reused while it is unchanged).
bin=$cache/bin
"$root/scripts/k8s-build.sh" "$bin"
# The NetworkPolicy enforcer (kube-router's firewall; its own module and stamp).
[ "${K8S_NETPOL:-1}" = 0 ] || K8S_CACHE=$cache K8S_STATE=$state "$root/scripts/k8s-netpol.sh" build
# gVisor: runsc and containerd-shim-runsc-v1 from tools/gvisor (once).
gvbin=""
if [ "${K8S_GVISOR:-1}" != 0 ]; then
	gvbin=$cache/gvisor
	"$root/scripts/gvisor-build.sh" "$gvbin"
fi

# --- state, certificates and kubeconfigs.
mkdir -p "$state"/{pki,logs,etcd,kubelet,containerd/root,containerd/state,cni/net.d,cni/ipam}
chmod 700 "$state"
: >"$state/pids"
# A failed start leaves nothing running: stop what was started.
trap 'rc=$?; if [ $rc -ne 0 ]; then echo "k8s-up: failed; stopping what was started (logs stay in $state/logs)" >&2; "$root/scripts/k8s-down.sh"; fi' EXIT
rm -f "$state"/logs/*.log
pki=$state/pki
# The node's address: the CNI bridge's gateway, made here so it exists before
# the first pod (the bridge plugin reuses it).
gw=$(echo "$pod_cidr" | awk -F'[./]' '{print $1"."$2"."$3"."$4+1}')
prefix=${pod_cidr#*/}
svc_ip=$(echo "$svc_cidr" | awk -F'[./]' '{print $1"."$2"."$3"."$4+1}')

cert() { # name cn org sans(openssl subjectAltName or "")
	local n=$1 cn=$2 o=$3 san=$4 ext
	openssl genrsa -out "$pki/$n.key" 2048 2>/dev/null
	openssl req -new -key "$pki/$n.key" -subj "/CN=$cn${o:+/O=$o}" -out "$pki/$n.csr" 2>/dev/null
	ext=$pki/$n.ext
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=${5:-clientAuth}"
		[ -n "$san" ] && echo "subjectAltName=$san"
	} >"$ext"
	openssl x509 -req -in "$pki/$n.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 30 -extfile "$ext" -out "$pki/$n.crt" 2>/dev/null
	rm -f "$pki/$n.csr" "$ext"
}
if [ ! -e "$pki/ca.crt" ]; then
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" \
		-days 30 -subj "/CN=agentd-k8s-ca" 2>/dev/null
	cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$gw,IP:$svc_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" serverAuth
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters ""
	cert admin admin system:masters ""
	cert controller-manager system:kube-controller-manager "" ""
	cert scheduler system:kube-scheduler "" ""
	cert kubelet "system:node:$node" system:nodes ""
	cert kubelet-serving "system:node:$node" system:nodes "IP:$gw,DNS:$node" serverAuth
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi
kubeconfig() { # name cert
	cat >"$state/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: agentd-k8s
  cluster:
    certificate-authority: $pki/ca.crt
    server: https://127.0.0.1:$api_port
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: agentd-k8s
  context: {cluster: agentd-k8s, user: $2, namespace: default}
current-context: agentd-k8s
KC
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler
kubeconfig kubelet kubelet

start() { # name args...: runs in the background, logs to logs/name.log, records the pid
	local n=$1
	shift
	"$@" >>"$state/logs/$n.log" 2>&1 &
	echo "$n $!" >>"$state/pids"
}
wait_for() { # what seconds command...: until command succeeds; fails fast when a recorded process died
	local what=$1 end=$(($(date +%s) + $2)) n p
	shift 2
	while [ "$(date +%s)" -lt "$end" ]; do
		"$@" >/dev/null 2>&1 && return 0
		while read -r n p; do
			kill -0 "$p" 2>/dev/null && continue
			tail -3 "$state/logs/$n.log" >&2
			die "$n exited (waiting for $what); see $state/logs/$n.log"
		done <"$state/pids"
		sleep 0.5
	done
	die "$what not ready in time; see $state/logs"
}

# --- the CNI bridge (the node address) and its config.
if ! ip link show "$bridge" >/dev/null 2>&1; then
	ip link add "$bridge" type bridge
	echo "$bridge" >"$state/bridge"
fi
ip addr replace "$gw/$prefix" dev "$bridge"
ip link set "$bridge" up
cni_conflist "$state/cni/net.d/10-agentd-k8s.conflist" agentd-k8s "$bridge" "$state/cni/ipam" "$pod_cidr" "$gw"

# --- etcd and the control plane.
start etcd "$bin/etcd" --name default --data-dir "$state/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
	--initial-cluster "default=http://127.0.0.1:$etcd_peer" --listen-metrics-urls "http://127.0.0.1:$((etcd_port + 20))"
start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
	--bind-address 127.0.0.1 --secure-port "$api_port" --advertise-address "$gw" \
	--service-cluster-ip-range "$svc_cidr" --allow-privileged=true \
	--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
	--client-ca-file "$pki/ca.crt" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
	--kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
	--cert-dir "$pki/apiserver-generated"
k="$bin/kubectl --kubeconfig $state/admin.kubeconfig"
wait_for kube-apiserver 120 $k get --raw /readyz
start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$state/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$state/controller-manager.kubeconfig" --authorization-kubeconfig "$state/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
	--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
	--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
	--service-cluster-ip-range "$svc_cidr"
start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
	--authentication-kubeconfig "$state/scheduler.kubeconfig" --authorization-kubeconfig "$state/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false

# --- the second containerd: its own root, state, socket; CRI on, the
# overlayfs snapshotter (K8S_SNAPSHOTTER).
# Pod network namespaces live in /run/netns. `ip netns add` (the hub's tests
# run it) bind-mounts /run/netns onto itself the first time it finds it a
# plain directory: a namespace containerd made before that is then hidden
# under the new mount, and removing it fails for good ("unlinkat
# /var/run/netns/cni-…: device or resource busy": the Pod stays Terminating).
# So /run/netns is made that shared mount here, before containerd starts, as
# ip would; ip then finds it one and mounts nothing over it.
mkdir -p /run/netns
if ! mountpoint -q /run/netns; then
	mount --bind /run/netns /run/netns
fi
mount --make-shared /run/netns
cd_sock=$state/containerd/containerd.sock
# gVisor's runtime (handler runsc): gVisor's own shim, found on containerd's
# PATH (containerd 1.6 has no runtime_path), drives runsc with the flags in
# runsc.toml: ptrace (no KVM here), the pod's network namespace (netstack),
# and host unix sockets opened through bind mounts (agentd dials the hub's).
gvisor_runtime() {
	[ -n "$gvbin" ] || return 0
	cat >"$state/containerd/runsc.toml" <<RUNSC
binary_name = "$gvbin/runsc"
root = "$state/containerd/runsc-root"
[runsc_config]
  platform = "ptrace"
  host-uds = "open"
RUNSC
	cat <<TOML
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      pod_annotations = ["dev.gvisor.*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$state/containerd/runsc.toml"
TOML
}
cat >"$state/containerd/config.toml" <<TOML
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$cd_sock"
[ttrpc]
  address = "$cd_sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine's root has no CAP_SYS_RESOURCE (not even in its bounding
  # set), so no process may lower its oom_score_adj below 0; unrestricted,
  # runc fails every pod sandbox on the kubelet's -998 ("failed to update
  # /proc/self/oom_score_adj: Permission denied"). Restricted, containerd
  # clamps the kubelet's scores to its own (0 here).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snapshotter"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$state/containerd/runc"
$(gvisor_runtime)
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$state/cni/net.d"
    max_conf_num = 1
TOML
start containerd env PATH="${gvbin:+$gvbin:}$PATH" containerd --config "$state/containerd/config.toml"
ctr="ctr --address $cd_sock -n k8s.io"
wait_for containerd 60 $ctr version

# --- images: the pause image made here, the rest from the local Docker engine.
"$bin/mkpause" -bin "$bin/pause" -name "$pause_image" -o "$state/pause.tar"
$ctr images import --snapshotter "$snapshotter" --no-unpack=false "$state/pause.tar" >/dev/null
# The kubernetes driver's agentd image: this checkout's static agentd alone,
# at /agentd (its init container copies it into each sandbox Pod).
log "building agentd for $agentd_image"
mkdir -p "$cache/agentd"
(cd "$root" && CGO_ENABLED=0 go build -trimpath \
	-ldflags "-X github.com/devdepot-ai/agentd/internal/version.Version=$version" \
	-o "$cache/agentd/agentd" ./cmd/agentd)
"$bin/mkpause" -bin "$cache/agentd/agentd" -path agentd -user 1000:1000 -name "$agentd_image" -o "$state/agentd.tar"
$ctr images import --snapshotter "$snapshotter" --no-unpack=false "$state/agentd.tar" >/dev/null
echo "$agentd_image" >"$state/agentd-image"
for img in $images; do
	if docker image inspect "$img" >/dev/null 2>&1; then
		log "importing $img from the local Docker engine"
		docker save "$img" | $ctr images import --snapshotter "$snapshotter" - >/dev/null
	else
		log "warning: $img is not in the local Docker engine; not imported"
	fi
done

# --- the kubelet.
cat >"$state/kubelet/config.yaml" <<KCFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $gw
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$cd_sock
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
KCFG
start kubelet "$bin/kubelet" --config "$state/kubelet/config.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
	--root-dir "$state/kubelet" --cert-dir "$state/kubelet/pki" --hostname-override "$node" --node-ip "$gw"
wait_for "node $node" 120 $k get node "$node"
wait_for "node $node Ready" 120 $k wait --for=condition=Ready "node/$node" --timeout=1s
wait_for "default service account" 60 $k get serviceaccount default
# NetworkPolicy enforced on the node (kube-router's firewall, a host process;
# k8s-down stops it and removes its chains and ipsets).
[ "${K8S_NETPOL:-1}" = 0 ] || K8S_CACHE=$cache K8S_STATE=$state K8S_SERVICE_CIDR=$svc_cidr "$root/scripts/k8s-netpol.sh" start

# RuntimeClass gvisor: handler runsc, gVisor's shim (docs/kubernetes.md).
if [ -n "$gvbin" ]; then
	$k apply -f - >/dev/null <<RC
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
RC
fi

log "agentd image for agenthub serve --kube-agentd-image: $agentd_image"
echo "export KUBECONFIG=$state/admin.kubeconfig PATH=$bin:\$PATH"
