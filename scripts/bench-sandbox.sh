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
#     on a paired machine through the same hub: the static agentd as a
#     process of its own (`agentd run`), which is what a paired machine
#     is; target <= 1.1x. BenchmarkExecSideBySide makes the calls in
#     turn, one to each target per round (the sandbox by conversation and
#     by id, the agentd process, and an agentd in the benchmark's process,
#     the optimistic bound printed beside), so that the machine's load
#     falls on all alike; it runs EXEC_COUNT times (a new hub and sandbox
#     each) and the summary takes the median of the runs.
#
# Needs the local Docker engine; the sandbox base image is built if missing
# (make sandbox-base). Raw results: .bench/sandbox-results.txt. Knobs (env):
# BENCHTIME (iterations of every benchmark, default 20x), EXEC_CALLS (calls
# per target per iteration of the exec benchmark, default 10: 200 calls to
# each with 20x), EXEC_COUNT (runs of the exec benchmark, default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
outdir=$root/.bench
raw=$outdir/sandbox-results.txt

BENCHTIME=${BENCHTIME:-20x}
EXEC_CALLS=${EXEC_CALLS:-10}
EXEC_COUNT=${EXEC_COUNT:-3}

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
	echo "benchtime $BENCHTIME; exec benchmark: $EXEC_CALLS calls to each target per iteration, $EXEC_COUNT runs"
} | tee -a "$raw" >&2

go_out=$tmp/go-bench.txt
printf '\n== go test -bench (one process)  [load average %s]\n' "$(loadavg)" | tee -a "$raw" >&2
AGENTD_BENCH_EXEC_CALLS=$EXEC_CALLS go test -run '^$' \
	-bench '^Benchmark(SandboxColdFirstExec|DockerRunExec|SandboxWarmFirstExec)$' \
	-benchtime "$BENCHTIME" -count 1 -timeout 60m ./internal/hub/ 2>&1 | tee "$go_out" | tee -a "$raw" >&2 ||
	die "go test failed (see $raw)"
grep -q '^BenchmarkSandboxColdFirstExec' "$go_out" || die "the benchmarks did not run (skipped? see $raw)"
exec_out=$tmp/go-bench-exec.txt
printf '\n== go test -bench ExecSideBySide -count %s  [load average %s]\n' "$EXEC_COUNT" "$(loadavg)" | tee -a "$raw" >&2
AGENTD_BENCH_EXEC_CALLS=$EXEC_CALLS go test -run '^$' -bench '^BenchmarkExecSideBySide$' \
	-benchtime "$BENCHTIME" -count "$EXEC_COUNT" -timeout 60m ./internal/hub/ 2>&1 | tee "$exec_out" | tee -a "$raw" >&2 ||
	die "go test failed (see $raw)"
grep -q '^BenchmarkExecSideBySide' "$exec_out" || die "the exec benchmark did not run (skipped? see $raw)"

# gobench NAME UNIT: the value reported with UNIT on BenchmarkNAME's line.
gobench() {
	awk -v name="$1" -v unit="$2" '
		$1 ~ "^Benchmark" name "(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$go_out"
}
# median UNIT: the median over the runs of BenchmarkExecSideBySide of the
# value reported with UNIT.
median() {
	awk -v unit="$1" '
		$1 ~ "^BenchmarkExecSideBySide(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) print $i }' "$exec_out" |
		sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.4g", (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2 }'
}
# runs UNIT: every run's value reported with UNIT, comma-separated.
runs() {
	awk -v unit="$1" '
		$1 ~ "^BenchmarkExecSideBySide(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) printf "%s%.2f", (n++ ? ", " : ""), $i }' "$exec_out"
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
sbx=$(median sandbox-p50-ms) sbx90=$(median sandbox-p90-ms)
byid=$(median sandbox-by-id-p50-ms)
machp=$(median process-p50-ms) machp90=$(median process-p90-ms)
mach=$(median inproc-p50-ms) mach90=$(median inproc-p90-ms)
r_cold=$(ratio "$cold" "$dock")
r_exec=$(median sandbox/process)
r_inproc=$(median sandbox/inproc)
r_machp=$(median process/inproc)

{
	sep=$(printf '%.0s-' {1..150})
	line "measure (p50, p90 in brackets)" "sandbox" "baseline, same run" "ratio / target"
	echo "$sep"
	line "cold: create -> first exec true" "$cold ms ($cold90)" "docker run -d + docker exec: $dock ms ($dock90)" "${r_cold:-n/a}x <= 1.2x: $(judge "$r_cold" 1.2)"
	line "  hub: create / start / online" "$(gobench SandboxColdFirstExec create-p50-ms) / $(gobench SandboxColdFirstExec start-p50-ms) / $(gobench SandboxColdFirstExec online-p50-ms) ms" \
		"docker run -d: $(gobench DockerRunExec run-p50-ms) ms, exec: $(gobench DockerRunExec exec-p50-ms) ms" ""
	line "warm pool: first exec of a conversation" "$warm ms ($warm90)" "" "<= 50 ms: $(judge "$warm" 50)"
	line "exec true in a running sandbox" "$sbx ms ($sbx90)" "paired machine (agentd run): $machp ms ($machp90)" "${r_exec:-n/a}x <= 1.1x: $(judge "$r_exec" 1.1)"
	line "  sandbox/machine of each run" "" "" "$(runs sandbox/process)"
	line "  the sandbox routed by its id" "$byid ms" "" ""
	line "  optimistic bound: agentd in-process" "" "$mach ms ($mach90)" "sandbox ${r_inproc:-n/a}x; agentd run ${r_machp:-n/a}x"
	echo "$sep"
	echo "All through a hub in the benchmark process; online: from the call to the sandbox's agentd connected."
	echo "exec: medians of $EXEC_COUNT runs of BenchmarkExecSideBySide (calls interleaved); the target is against agentd run."
	echo "load average at start: $load_start; at the end: $(loadavg) ($(nproc) CPUs)."
} >"$tmp/summary.txt"
printf '\n== summary\n' | tee -a "$raw" >&2
met=$(grep -c ': MET' "$tmp/summary.txt" || true)
missed=$(grep -c ': MISSED' "$tmp/summary.txt" || true)
echo "targets met: $met, missed: $missed" >>"$tmp/summary.txt"
tee -a "$raw" <"$tmp/summary.txt"
echo "(raw results: ${raw#"$root"/})" >&2
