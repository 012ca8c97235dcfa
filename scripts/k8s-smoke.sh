#!/usr/bin/env bash
# k8s-smoke.sh: checks that the cluster from scripts/k8s-up.sh is real: the
# node is Ready, a Pod from ghcr.io/devdepot-ai/sandbox-base:1 (imported from
# the local Docker engine, imagePullPolicy Never) runs `id -u` as the sandbox
# user under the sandbox's securityContext and its output comes back through
# `kubectl logs` (apiserver -> kubelet), and a hostPath PersistentVolume binds
# to a claim that a Pod writes and the host sees. Exits non-zero on the first
# failure. Not part of `make test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8S_CACHE:-$root/.cache/k8s}
state=${K8S_STATE:-$cache/state}
export KUBECONFIG=$state/admin.kubeconfig
k="$cache/bin/kubectl"
ns=agentd-smoke-$$
fail() { echo "k8s-smoke: FAIL: $*" >&2; $k get pods -n "$ns" -o wide >&2 || true; $k get events -n "$ns" >&2 || true; exit 1; }
pv=agentd-smoke-pv-$$
pvdir=$state/pv/$pv
cleanup() {
	$k delete namespace "$ns" --wait=true --timeout=60s >/dev/null 2>&1 || true
	$k delete pv "$pv" --wait=true --timeout=30s >/dev/null 2>&1 || true
	rm -rf "$pvdir"
}
trap cleanup EXIT
t0=$(date +%s)

$k wait --for=condition=Ready node/agentd-k8s --timeout=10s >/dev/null || fail "node agentd-k8s not Ready"
echo "k8s-smoke: node Ready"
$k create namespace "$ns" >/dev/null
$k -n "$ns" wait --for=create serviceaccount/default --timeout=30s >/dev/null 2>&1 ||
	sleep 2 # older kubectl: no --for=create

mkdir -p "$pvdir" && chown 1000:1000 "$pvdir"
$k apply -n "$ns" -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: $pvdir, type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: work}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: $pv
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: id}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext: {runAsUser: 1000, runAsGroup: 1000, runAsNonRoot: true}
  containers:
  - name: id
    image: ghcr.io/devdepot-ai/sandbox-base:1
    imagePullPolicy: Never
    command: ["sh", "-c", "id -u && echo kept > /work/proof"]
    securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
    resources: {limits: {cpu: 500m, memory: 256Mi}}
    volumeMounts: [{name: work, mountPath: /work}]
  volumes: [{name: work, persistentVolumeClaim: {claimName: work}}]
YAML
$k -n "$ns" wait --for=jsonpath='{.status.phase}'=Bound pvc/work --timeout=60s >/dev/null || fail "PVC not bound to the hostPath PV"
echo "k8s-smoke: PVC bound to hostPath PV $pv"
$k -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/id --timeout=120s >/dev/null || fail "pod id did not succeed"
out=$($k -n "$ns" logs id) || fail "kubectl logs"
[ "$out" = 1000 ] || fail "id -u printed '$out', want 1000"
echo "k8s-smoke: pod from sandbox-base printed id -u = $out through kubectl logs"
[ "$(cat "$pvdir/proof" 2>/dev/null)" = kept ] || fail "the pod's write to the PVC is not in $pvdir"
echo "k8s-smoke: the pod's write to the PVC is on the host"
# RuntimeClass gvisor: make k8s-up creates it unless K8S_GVISOR=0 (gVisor's shim).
if $k get runtimeclass gvisor >/dev/null 2>&1; then
	$k apply -n "$ns" -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: gvisor}
spec:
  runtimeClassName: gvisor
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext: {runAsUser: 1000, runAsNonRoot: true}
  containers:
  - name: dmesg
    image: ghcr.io/devdepot-ai/sandbox-base:1
    imagePullPolicy: Never
    command: ["sh", "-c", "id -u; dmesg | head -1"]
YAML
	$k -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/gvisor --timeout=120s >/dev/null || fail "pod gvisor (RuntimeClass gvisor) did not succeed"
	out=$($k -n "$ns" logs gvisor) || fail "kubectl logs gvisor"
	case "$out" in
	*gVisor*) echo "k8s-smoke: RuntimeClass gvisor runs the pod under gVisor ($(echo "$out" | tail -1))" ;;
	*) fail "pod gvisor's dmesg is not gVisor's: $out" ;;
	esac
fi
echo "k8s-smoke: ok in $(($(date +%s) - t0)) s"
