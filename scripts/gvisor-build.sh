#!/usr/bin/env bash
# gvisor-build.sh DIR: builds gVisor's runsc and its containerd shim
# (containerd-shim-runsc-v1) into DIR, both from the one gVisor version that
# tools/gvisor/go.mod pins (the module's `go` branch, a pseudo-version),
# static (CGO_ENABLED=0), for the local cluster's gVisor RuntimeClass
# (scripts/k8s-up.sh; docs/kubernetes.md, "gVisor").
#
# The shim is tools/gvisor/shim: gVisor's, answering containerd 1.x's start
# protocol (its socket address alone). It is built against a copy of the
# module in DIR/src with one change: gVisor's shim fails its start when it
# cannot lower its daemon's OOM score to -999, and root here has no
# CAP_SYS_RESOURCE ("failed to set OOM Score on shim: write
# /proc/N/oom_score_adj: permission denied"); the copy leaves the score as
# it is on EACCES, as containerd's own shims do. Skips the work when
# DIR/.stamp matches tools/gvisor and this script.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: gvisor-build.sh DIR}
mod=$root/tools/gvisor
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$mod"/shim/main.go "$0" | sha256sum | cut -c1-16)
[ "$(cat "$bin/.stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$bin/runsc" ] && [ -x "$bin/containerd-shim-runsc-v1" ] && exit 0
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
cd "$mod"
export CGO_ENABLED=0
v=$(go list -m -f '{{.Version}}' gvisor.dev/gvisor)
go mod download gvisor.dev/gvisor
dir=$(go list -m -f '{{.Dir}}' gvisor.dev/gvisor)
t0=$(date +%s)
echo "gvisor-build: building gVisor $v into $bin (cold: ~6 min for runsc, ~4 for the shim on 2 loaded cores)" >&2

# The patched copy, at a fixed path so that the Go build cache serves a rebuild.
src=$bin/src
rm -rf "$src"
cp -r "$dir" "$src"
chmod -R u+w "$src"
mgr=$src/pkg/shim/v1/manager.go
perl -0pi -e 's|(\tif err := sys.SetOOMScore\(cmd.Process.Pid, oomScoreMax\); err != nil \{\n)(\t\treturn shim.BootstrapParams\{\}, fmt.Errorf\("failed to set OOM Score on shim: %w", err\)\n)|$1\t\tif !os.IsPermission(err) { // agentd: no CAP_SYS_RESOURCE here\n\t$2\t\t}\n|' "$mgr"
grep -q 'agentd: no CAP_SYS_RESOURCE here' "$mgr" ||
	{ echo "gvisor-build: $mgr changed upstream: the OOM-score patch no longer applies" >&2; exit 1; }
work=$bin/modfile
mkdir -p "$work"
cp go.mod "$work/go.mod"
cp go.sum "$work/go.sum"
echo "replace gvisor.dev/gvisor => $src" >>"$work/go.mod"

for c in runsc containerd-shim-runsc-v1; do
	t=$(date +%s)
	if [ "$c" = runsc ]; then
		go build -modfile "$work/go.mod" -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$v" -o "$bin/$c.new" gvisor.dev/gvisor/runsc
	else
		go build -modfile "$work/go.mod" -ldflags "-s -w" -o "$bin/$c.new" ./shim
	fi
	mv "$bin/$c.new" "$bin/$c"
	echo "gvisor-build: $c $(($(date +%s) - t)) s" >&2
done
echo "$stamp" >"$bin/.stamp"
echo "gvisor-build: done in $(($(date +%s) - t0)) s" >&2
