#!/usr/bin/env bash
# make bench-sandbox: the sandboxes' benchmarks, each next to its baseline
# in one go test process (internal/hub/sandbox_bench_test.go):
#
#   * a new conversation's first exec of `true` in a cold sandbox (no warm
#     pool: the hub creates it) against `docker run -d --network none
#     <base image> sleep 300` + `docker exec <id> true` with the docker CLI;
#     target <= 1.2x;
#   * the first exec of a new conversation served from a full warm pool;
#     target <= 50 ms;
#   * exec of `true` in a running sandbox through the hub (routed by
#     environment and conversation, as an agent's calls are) against exec
#     on a paired agentd through the same kind of hub (in the benchmark's
#     process, as in make bench-hub); target <= 1.1x. Printed beside it, to
#     show where the difference goes: the sandbox reached by its id (no
#     environment lookup), and the paired agentd as a process of its own.
#
# Needs the local Docker engine; the sandbox base image is built if missing
# (make sandbox-base). Raw results: .bench/sandbox-results.txt. Knobs (env):
# BENCHTIME (iterations of every benchmark, default 20x), EXEC_CALLS (calls
# per iteration of the exec benchmarks, default 10: 200 calls with 20x).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
outdir=$root/.bench
raw=$outdir/sandbox-results.txt

BENCHTIME=${BENCHTIME:-20x}
EXEC_CALLS=${EXEC_CALLS:-10}

die() { echo "bench-sandbox: $*" >&2; exit 1; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'; }

command -v go >/dev/null || die "go is not on PATH"
command -v docker >/dev/null || die "docker is not on PATH: these benchmarks need a Docker engine"
docker info --format '{{.ServerVersion}}' >/dev/null 2>&1 || die "docker info failed: no Docker engine to run sandboxes on"
mkdir -p "$outdir"
: >"$raw"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-bench-sandbox.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

load_start=$(loadavg)
{
	echo "agentd sandbox benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
	echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr); $(go version); docker engine $(docker info --format '{{.ServerVersion}}')"
	echo "load average at start: $load_start"
	echo "benchtime $BENCHTIME; exec benchmarks: $EXEC_CALLS calls per iteration"
} | tee -a "$raw" >&2

go_out=$tmp/go-bench.txt
printf '\n== go test -bench (one process)  [load average %s]\n' "$(loadavg)" | tee -a "$raw" >&2
AGENTD_BENCH_EXEC_CALLS=$EXEC_CALLS go test -run '^$' \
	-bench '^Benchmark(SandboxColdFirstExec|DockerRunExec|SandboxWarmFirstExec|SandboxExec|SandboxExecByID|MachineExec|MachineProcessExec)$' \
	-benchtime "$BENCHTIME" -count 1 -timeout 60m ./internal/hub/ 2>&1 | tee "$go_out" | tee -a "$raw" >&2 ||
	die "go test failed (see $raw)"
grep -q '^BenchmarkSandboxColdFirstExec' "$go_out" || die "the benchmarks did not run (skipped? see $raw)"

# gobench NAME UNIT: the value reported with UNIT on BenchmarkNAME's line.
gobench() {
	awk -v name="$1" -v unit="$2" '
		$1 ~ "^Benchmark" name "(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$go_out"
}
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || true; }
# judge VALUE TARGET: MET/MISSED for VALUE <= TARGET.
judge() {
	if [[ -z $1 ]]; then
		echo "n/a"
	elif awk -v a="$1" -v t="$2" 'BEGIN { exit !(a <= t) }'; then
		echo "MET"
	else
		echo "MISSED"
	fi
}
line() { printf '%-42s %-26s %-50s %s\n' "$@"; }

cold=$(gobench SandboxColdFirstExec p50-ms) cold90=$(gobench SandboxColdFirstExec p90-ms)
dock=$(gobench DockerRunExec p50-ms) dock90=$(gobench DockerRunExec p90-ms)
warm=$(gobench SandboxWarmFirstExec p50-ms) warm90=$(gobench SandboxWarmFirstExec p90-ms)
sbx=$(gobench SandboxExec p50-ms) sbx90=$(gobench SandboxExec p90-ms)
byid=$(gobench SandboxExecByID p50-ms)
mach=$(gobench MachineExec p50-ms) mach90=$(gobench MachineExec p90-ms)
machp=$(gobench MachineProcessExec p50-ms)
r_cold=$(ratio "$cold" "$dock")
r_exec=$(ratio "$sbx" "$mach")
r_byid=$(ratio "$byid" "$mach")
r_machp=$(ratio "$machp" "$mach")
r_byid_p=$(ratio "$byid" "$machp")

{
	sep=$(printf '%.0s-' {1..150})
	line "measure (p50, p90 in brackets)" "sandbox" "baseline, same run" "ratio / target"
	echo "$sep"
	line "cold: create -> first exec true" "$cold ms ($cold90)" "docker run -d + docker exec: $dock ms ($dock90)" "${r_cold:-n/a}x <= 1.2x: $(judge "$r_cold" 1.2)"
	line "  hub: create / start / online" "$(gobench SandboxColdFirstExec create-p50-ms) / $(gobench SandboxColdFirstExec start-p50-ms) / $(gobench SandboxColdFirstExec online-p50-ms) ms" \
		"docker run -d: $(gobench DockerRunExec run-p50-ms) ms, exec: $(gobench DockerRunExec exec-p50-ms) ms" ""
	line "warm pool: first exec of a conversation" "$warm ms ($warm90)" "" "<= 50 ms: $(judge "$warm" 50)"
	line "exec true in a running sandbox" "$sbx ms ($sbx90)" "paired agentd: $mach ms ($mach90)" "${r_exec:-n/a}x <= 1.1x: $(judge "$r_exec" 1.1)"
	ec=$(gobench SandboxExec engine-calls/op) img=$(gobench SandboxExec image-p50-ms)
	line "  engine calls per exec (image lookups)" "${ec:-0}${img:+, $img ms each}" "" ""
	line "  the same routed by sandbox id" "$byid ms" "agentd as its own process: $machp ms" "${r_byid:-n/a}x; ${r_byid_p:-n/a}x of the process"
	line "  paired agentd as its own process" "" "$machp ms" "${r_machp:-n/a}x of in-process"
	echo "$sep"
	echo "All through a hub in the benchmark process; online: from the call to the sandbox's agentd connected."
	echo "load average at start: $load_start; at the end: $(loadavg) ($(nproc) CPUs)."
} >"$tmp/summary.txt"
printf '\n== summary\n' | tee -a "$raw" >&2
met=$(grep -c ': MET' "$tmp/summary.txt" || true)
missed=$(grep -c ': MISSED' "$tmp/summary.txt" || true)
echo "targets met: $met, missed: $missed" >>"$tmp/summary.txt"
tee -a "$raw" <"$tmp/summary.txt"
echo "(raw results: ${raw#"$root"/})" >&2
