#!/usr/bin/env bash
# k8s-build.sh DIR: builds the local cluster's binaries from tools/k8s into DIR
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl,
# etcd, the pause program and mkpause), static (CGO_ENABLED=0), with the
# version that tools/k8s/go.mod pins stamped in (as the release builds do), so
# `kubectl version` and the API's /version say v1.35.x, not v0.0.0-master.
# Skips the work when DIR/.stamp matches tools/k8s; K8S_REUSE_BIN=1 keeps
# binaries already in DIR (copied from a checkout built at the same versions).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: k8s-build.sh DIR}
mod=$root/tools/k8s
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$mod"/*/main.go "$0" | sha256sum | cut -c1-16)
[ "$(cat "$bin/.stamp" 2>/dev/null)" = "$stamp" ] && exit 0
mkdir -p "$bin"
cd "$mod"
export CGO_ENABLED=0
v=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=${v#v1.}
minor=${minor%%.*}
ld=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
t0=$(date +%s)
echo "k8s-build: building Kubernetes $v into $bin (cold: ~25 min on 2 loaded cores; see docs/kubernetes.md)" >&2
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd; do
	[ -n "${K8S_REUSE_BIN:-}" ] && [ -x "$bin/$c" ] && continue
	t=$(date +%s)
	if [ "$c" = etcd ]; then
		go build -ldflags "-s -w" -o "$bin/$c.new" ./etcd
	else
		go build -ldflags "-s -w $ld" -o "$bin/$c.new" "k8s.io/kubernetes/cmd/$c"
	fi
	mv "$bin/$c.new" "$bin/$c"
	echo "k8s-build: $c $(($(date +%s) - t)) s" >&2
done
go build -ldflags "-s -w" -o "$bin/pause" ./pause
go build -o "$bin/mkpause" ./mkpause
echo "$stamp" >"$bin/.stamp"
echo "k8s-build: done in $(($(date +%s) - t0)) s" >&2
