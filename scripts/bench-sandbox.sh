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
#   * the first exec in a conversation's sandbox just paused (the call
#     unpauses it), target <= 20 ms; and just stopped (the call starts its
#     container again and waits for its agentd), target <= 1.2x the cold
#     create -> first exec of the same run;
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
#   * runc and gVisor side by side (BenchmarkIsolation, one process, the
#     built-in environment under each): cold create -> first exec, warm-pool
#     first exec, exec p50/p99 of true, a 256 MiB write through the files
#     API, python3 -c pass, unpacking 10,000 small files, host memory of an
#     idle sandbox (its cgroup). Targets for gVisor: exec p50 <= 2x runc,
#     warm first exec <= 50 ms, memory <= 2x runc. gVisor needs make
#     sandbox-runtime; without it the table says so and has runc alone.
#     ISOLATION=0 leaves it out.
#
# Needs the local Docker engine (DOCKER_HOST, or the default socket); the
# sandbox base image is built if missing (make sandbox-base). Raw results:
# .bench/sandbox-results.txt. Knobs (env): BENCHTIME (iterations of every
# benchmark, default 20x), EXEC_CALLS (calls per target per iteration of the
# exec benchmark, default 10: 200 calls to each with 20x), EXEC_COUNT (runs
# of the exec benchmark, default 3).
#
# OVERLAY2=1 also runs the exec benchmark on a private engine with the
# kernel's overlay2 storage driver, for engines (like this project's test
# machine) whose storage driver is fuse-overlayfs: a user-space FUSE daemon
# that every path walk and program load in a container goes through. The
# script starts a second dockerd of its own (root needed) that shares
# nothing with the local engine: its own data root (a new directory under
# OVERLAY2_BASE, default /var/tmp, which must be ext4 or xfs), exec root
# (under /run), pid file, unix socket, containerd namespace, a bridge of its
# own (OVERLAY2_BRIDGE_ADDR, default 172.31.254.1/24; never --bridge none,
# which makes dockerd delete the host's docker0 and so breaks the local
# engine's default network), no iptables rules, no IP forwarding or
# masquerading change, no TCP listener; loads the base image into it with docker
# save | docker load; and runs the exec benchmark EXEC_COUNT times on each
# engine in turn (local, overlay2, local, ...). On exit, failed or not, it
# stops that dockerd, unmounts anything left under its directories, removes
# them and its bridge. Without root, dockerd, ip, the overlay filesystem, an
# ext4/xfs OVERLAY2_BASE or a free OVERLAY2_BRIDGE_ADDR subnet it says why
# and runs on the local engine only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
outdir=$root/.bench
raw=$outdir/sandbox-results.txt

BENCHTIME=${BENCHTIME:-20x}
EXEC_CALLS=${EXEC_CALLS:-10}
EXEC_COUNT=${EXEC_COUNT:-3}
OVERLAY2=${OVERLAY2:-}
ISOLATION=${ISOLATION:-1}
OVERLAY2_BASE=${OVERLAY2_BASE:-/var/tmp}
OVERLAY2_BRIDGE_ADDR=${OVERLAY2_BRIDGE_ADDR:-172.31.254.1/24}
base_image=${SANDBOX_BASE_IMAGE:-ghcr.io/devdepot-ai/sandbox-base:1}

die() { echo "bench-sandbox: $*" >&2; exit 1; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'; }

command -v go >/dev/null || die "go is not on PATH"
command -v docker >/dev/null || die "docker is not on PATH: these benchmarks need a Docker engine"
docker info --format '{{.ServerVersion}}' >/dev/null 2>&1 || die "docker info failed: no Docker engine to run sandboxes on"
mkdir -p "$outdir"
: >"$raw"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-bench-sandbox.XXXXXX")

# The private overlay2 engine (OVERLAY2=1): its data root, exec root,
# socket, dockerd's pid and its bridge, set by ovl_start.
ovl_dir='' ovl_exec='' ovl_host='' ovl_pid='' ovl_br=''

# ovl_unavailable prints why a private overlay2 engine cannot run here,
# nothing if it can.
ovl_unavailable() {
	local fs
	if [[ $(id -u) != 0 ]]; then
		echo "not root (dockerd needs root)"
	elif ! command -v dockerd >/dev/null; then
		echo "no dockerd on PATH"
	elif ! command -v ip >/dev/null; then
		echo "no ip (iproute2) on PATH"
	elif [[ -n $(ip -4 route show to match "${OVERLAY2_BRIDGE_ADDR%/*}" | grep -v '^default') ]]; then
		echo "OVERLAY2_BRIDGE_ADDR $OVERLAY2_BRIDGE_ADDR is in a subnet this host already routes"
	elif ! grep -qw overlay /proc/filesystems; then
		echo "the kernel has no overlay filesystem (/proc/filesystems)"
	elif ! fs=$(stat -f -c %T "$OVERLAY2_BASE" 2>/dev/null); then
		echo "OVERLAY2_BASE $OVERLAY2_BASE does not exist"
	elif [[ $fs != ext2/ext3 && $fs != xfs ]]; then
		echo "OVERLAY2_BASE $OVERLAY2_BASE is on $fs, not ext4 or xfs"
	fi
}

# ovl_start starts the private overlay2 engine and loads the base image
# into it; it fails (and ovl_stop cleans up) if dockerd does not come up
# with overlay2.
ovl_start() {
	# Called as ovl_start || die, where set -e does not apply: each step
	# checks.
	local i driver br
	ovl_dir=$(mktemp -d "$OVERLAY2_BASE/agentd-bench-ovl.XXXXXX") || return 1
	# Short: containerd's sockets live under the exec root.
	ovl_exec=$(mktemp -d /run/agentd-bench-ovl.XXXXXX) || return 1
	ovl_host=unix://$ovl_exec/docker.sock
	# A bridge of its own: with --bridge none dockerd deletes docker0,
	# the local engine's.
	br=agovl-${ovl_exec##*.}
	ip link add "$br" type bridge || return 1
	ovl_br=$br
	ip addr add "$OVERLAY2_BRIDGE_ADDR" dev "$ovl_br" || return 1
	ip link set "$ovl_br" up || return 1
	echo '{}' >"$ovl_dir/daemon.json" || return 1 # not /etc/docker/daemon.json
	dockerd --config-file "$ovl_dir/daemon.json" --data-root "$ovl_dir/data" \
		--exec-root "$ovl_exec" --pidfile "$ovl_exec/dockerd.pid" -H "$ovl_host" \
		--storage-driver overlay2 --bridge "$ovl_br" \
		--iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
		--containerd-namespace "agentd-bench-${ovl_exec##*.}" \
		--containerd-plugins-namespace "agentd-bench-plugins-${ovl_exec##*.}" \
		>"$ovl_dir/dockerd.log" 2>&1 &
	ovl_pid=$!
	for ((i = 0; i < 120; i++)); do
		docker -H "$ovl_host" info >/dev/null 2>&1 && break
		kill -0 "$ovl_pid" 2>/dev/null || break
		sleep 0.5
	done
	driver=$(docker -H "$ovl_host" info --format '{{.Driver}}' 2>/dev/null) || driver=''
	if [[ $driver != overlay2 ]]; then
		echo "bench-sandbox: the private dockerd did not come up with overlay2 (driver '${driver}'); its log:" >&2
		tail -n 20 "$ovl_dir/dockerd.log" >&2
		return 1
	fi
	docker save "$base_image" | docker -H "$ovl_host" load >/dev/null
}

# ovl_stop stops the private engine (its containers first), unmounts what
# is left under its directories, deepest first, removes them and its
# bridge. Safe to call when nothing was started.
ovl_stop() {
	local i pid m left
	[[ -n $ovl_dir || -n $ovl_exec || -n $ovl_br ]] || return 0
	if [[ -n $ovl_pid ]] && kill -0 "$ovl_pid" 2>/dev/null; then
		docker -H "$ovl_host" ps -aq 2>/dev/null | xargs -r docker -H "$ovl_host" rm -f >/dev/null 2>&1 || true
		kill -TERM "$ovl_pid"
		for ((i = 0; i < 60; i++)); do
			kill -0 "$ovl_pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -0 "$ovl_pid" 2>/dev/null && kill -KILL "$ovl_pid"
	fi
	[[ -z $ovl_pid ]] || wait "$ovl_pid" 2>/dev/null || true
	# dockerd stops its containerd; if dockerd had to be killed, it did not.
	if pid=$(cat "$ovl_exec/containerd/containerd.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" || true
	fi
	ovl_mounts | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" || true
	done
	left=$(ovl_mounts)
	if [[ -n $left ]]; then
		echo "bench-sandbox: mounts left under the private engine's directories, not removing them:" >&2
		echo "$left" >&2
	else
		rm -rf --one-file-system "$ovl_dir" "$ovl_exec"
	fi
	if [[ -n $ovl_br ]] && ip link show "$ovl_br" >/dev/null 2>&1; then
		ip link del "$ovl_br" || true
	fi
	ovl_dir='' ovl_exec='' ovl_pid='' ovl_br=''
}

# ovl_mounts lists the mount points under the private engine's directories.
ovl_mounts() {
	findmnt -rn -o TARGET | awk -v a="${ovl_dir:-/nonexistent}" -v b="${ovl_exec:-/nonexistent}" \
		'$0 == a || $0 == b || index($0, a "/") == 1 || index($0, b "/") == 1'
}

trap 'ovl_stop; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ovl_why=''
if [[ -n $OVERLAY2 ]]; then
	ovl_why=$(ovl_unavailable)
	[[ -z $ovl_why ]] || echo "bench-sandbox: OVERLAY2 set but no private overlay2 engine: $ovl_why; the local engine only" >&2
fi
main_driver=$(docker info --format '{{.Driver}}')

load_start=$(loadavg)
{
	echo "agentd sandbox benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
	echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr); $(go version); docker engine $(docker info --format '{{.ServerVersion}}'), storage driver $main_driver"
	echo "load average at start: $load_start"
	echo "benchtime $BENCHTIME; exec benchmark: $EXEC_CALLS calls to each target per iteration, $EXEC_COUNT runs"
} | tee -a "$raw" >&2

go_out=$tmp/go-bench.txt
printf '\n== go test -bench (one process)  [load average %s]\n' "$(loadavg)" | tee -a "$raw" >&2
AGENTD_BENCH_EXEC_CALLS=$EXEC_CALLS go test -run '^$' \
	-bench '^Benchmark(SandboxColdFirstExec|DockerRunExec|SandboxWarmFirstExec|SandboxPausedFirstExec|SandboxStoppedFirstExec)$' \
	-benchtime "$BENCHTIME" -count 1 -timeout 60m ./internal/hub/ 2>&1 | tee "$go_out" | tee -a "$raw" >&2 ||
	die "go test failed (see $raw)"
grep -q '^BenchmarkSandboxColdFirstExec' "$go_out" || die "the benchmarks did not run (skipped? see $raw)"
# The exec benchmark runs from a test binary built once, EXEC_COUNT times
# (a new hub and sandbox each), alternating between the engines when there
# are two.
exec_out=$tmp/go-bench-exec.txt ovl_out=$tmp/go-bench-exec-overlay2.txt
: >"$exec_out"
: >"$ovl_out"
hub_test=$tmp/hub.test
go test -c -o "$hub_test" ./internal/hub/ || die "go test -c ./internal/hub/ failed"
if [[ -n $OVERLAY2 && -z $ovl_why ]]; then
	printf '\n== a private dockerd with overlay2  [load average %s]\n' "$(loadavg)" | tee -a "$raw" >&2
	ovl_start || die "the private overlay2 engine did not start (see above)"
	echo "private engine: $(docker -H "$ovl_host" info --format '{{.ServerVersion}}, storage driver {{.Driver}}, data root {{.DockerRootDir}}'), socket $ovl_host" |
		tee -a "$raw" >&2
fi
# exec_run N NAME HOST OUT: run N of the exec benchmark, on the engine at
# HOST (empty: the local engine), appended to OUT.
exec_run() {
	local n=$1
	shift
	printf '\n== BenchmarkExecSideBySide, run %s on %s  [load average %s]\n' "$n" "$1" "$(loadavg)" | tee -a "$raw" >&2
	(cd internal/hub && env ${2:+DOCKER_HOST="$2"} AGENTD_BENCH_EXEC_CALLS="$EXEC_CALLS" "$hub_test" \
		-test.run '^$' -test.bench '^BenchmarkExecSideBySide$' -test.benchtime "$BENCHTIME" -test.count 1 \
		-test.timeout 30m) 2>&1 | tee -a "$3" | tee -a "$raw" >&2 || die "the exec benchmark failed on $1 (see $raw)"
}
for ((i = 1; i <= EXEC_COUNT; i++)); do
	exec_run "$i" "the local engine ($main_driver)" "" "$exec_out"
	[[ -z $ovl_host ]] || exec_run "$i" "the private engine (overlay2)" "$ovl_host" "$ovl_out"
done
grep -q '^BenchmarkExecSideBySide' "$exec_out" || die "the exec benchmark did not run (skipped? see $raw)"
if [[ -n $ovl_host ]]; then
	grep -q '^BenchmarkExecSideBySide' "$ovl_out" || die "the exec benchmark did not run on overlay2 (skipped? see $raw)"
	ovl_stop
fi

# gobench NAME UNIT: the value reported with UNIT on BenchmarkNAME's line.
gobench() {
	awk -v name="$1" -v unit="$2" '
		$1 ~ "^Benchmark" name "(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$go_out"
}
# median UNIT [FILE]: the median over the runs of BenchmarkExecSideBySide
# (in FILE, default the local engine's) of the value reported with UNIT.
median() {
	awk -v unit="$1" '
		$1 ~ "^BenchmarkExecSideBySide(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) print $i }' "${2:-$exec_out}" |
		sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.4g", (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2 }'
}
# runs UNIT [FILE]: every run's value reported with UNIT, comma-separated.
runs() {
	awk -v unit="$1" '
		$1 ~ "^BenchmarkExecSideBySide(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) printf "%s%.2f", (n++ ? ", " : ""), $i }' "${2:-$exec_out}"
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
line() { printf '%-50s %-26s %-50s %s\n' "$@"; }

cold=$(gobench SandboxColdFirstExec p50-ms) cold90=$(gobench SandboxColdFirstExec p90-ms)
dock=$(gobench DockerRunExec p50-ms) dock90=$(gobench DockerRunExec p90-ms)
warm=$(gobench SandboxWarmFirstExec p50-ms) warm90=$(gobench SandboxWarmFirstExec p90-ms)
paused=$(gobench SandboxPausedFirstExec p50-ms) paused90=$(gobench SandboxPausedFirstExec p90-ms)
stopped=$(gobench SandboxStoppedFirstExec p50-ms) stopped90=$(gobench SandboxStoppedFirstExec p90-ms)
sbx=$(median sandbox-p50-ms) sbx90=$(median sandbox-p90-ms)
byid=$(median sandbox-by-id-p50-ms)
machp=$(median process-p50-ms) machp90=$(median process-p90-ms)
mach=$(median inproc-p50-ms) mach90=$(median inproc-p90-ms)
r_cold=$(ratio "$cold" "$dock")
r_stopped=$(ratio "$stopped" "$cold")
r_exec=$(median sandbox/process)
r_inproc=$(median sandbox/inproc)
r_machp=$(median process/inproc)
if [[ -n $ovl_host ]]; then
	o_sbx=$(median sandbox-p50-ms "$ovl_out") o_sbx90=$(median sandbox-p90-ms "$ovl_out")
	o_machp=$(median process-p50-ms "$ovl_out") o_machp90=$(median process-p90-ms "$ovl_out")
	o_byid=$(median sandbox-by-id-p50-ms "$ovl_out") o_mach=$(median inproc-p50-ms "$ovl_out")
	r_oexec=$(median sandbox/process "$ovl_out")
fi

{
	sep=$(printf '%.0s-' {1..150})
	line "measure (p50, p90 in brackets)" "sandbox" "baseline, same run" "ratio / target"
	echo "$sep"
	line "cold: create -> first exec true" "$cold ms ($cold90)" "docker run -d + docker exec: $dock ms ($dock90)" "${r_cold:-n/a}x <= 1.2x: $(judge "$r_cold" 1.2)"
	line "  hub: create / start / online" "$(gobench SandboxColdFirstExec create-p50-ms) / $(gobench SandboxColdFirstExec start-p50-ms) / $(gobench SandboxColdFirstExec online-p50-ms) ms" \
		"docker run -d: $(gobench DockerRunExec run-p50-ms) ms, exec: $(gobench DockerRunExec exec-p50-ms) ms" ""
	line "warm pool: first exec of a conversation" "$warm ms ($warm90)" "" "<= 50 ms: $(judge "$warm" 50)"
	line "paused -> first exec true" "$paused ms ($paused90)" "" "<= 20 ms: $(judge "$paused" 20)"
	line "stopped -> first exec true" "$stopped ms ($stopped90)" "cold create -> first exec: $cold ms" "${r_stopped:-n/a}x <= 1.2x: $(judge "$r_stopped" 1.2)"
	line "exec true in a running sandbox ($main_driver)" "$sbx ms ($sbx90)" "paired machine (agentd run): $machp ms ($machp90)" "${r_exec:-n/a}x <= 1.1x: $(judge "$r_exec" 1.1)"
	line "  sandbox/machine of each run" "" "" "$(runs sandbox/process)"
	line "  the sandbox routed by its id" "$byid ms" "" ""
	line "  optimistic bound: agentd in-process" "" "$mach ms ($mach90)" "sandbox ${r_inproc:-n/a}x; agentd run ${r_machp:-n/a}x"
	if [[ -n $ovl_host ]]; then
		line "exec true in a running sandbox (overlay2)" "$o_sbx ms ($o_sbx90)" "paired machine (agentd run): $o_machp ms ($o_machp90)" "${r_oexec:-n/a}x <= 1.1x: $(judge "$r_oexec" 1.1)"
		line "  sandbox/machine of each run" "" "" "$(runs sandbox/process "$ovl_out")"
		line "  by id; agentd in-process" "$o_byid ms" "$o_mach ms" ""
	fi
	echo "$sep"
	echo "All through a hub in the benchmark process; online: from the call to the sandbox's agentd connected."
	echo "exec: medians of $EXEC_COUNT runs of BenchmarkExecSideBySide (calls interleaved); the target is against agentd run."
	[[ -z $ovl_host ]] || echo "overlay2: a private dockerd started by this script, its runs alternating with the local engine's."
	echo "load average at start: $load_start; at the end: $(loadavg) ($(nproc) CPUs)."
} >"$tmp/summary.txt"
printf '\n== summary\n' | tee -a "$raw" >&2
met=$(grep -c ': MET' "$tmp/summary.txt" || true)
missed=$(grep -c ': MISSED' "$tmp/summary.txt" || true)
echo "targets met: $met, missed: $missed" >>"$tmp/summary.txt"
tee -a "$raw" <"$tmp/summary.txt"

# runc and gVisor side by side.
if [[ $ISOLATION != 0 ]]; then
	iso_out=$tmp/go-bench-isolation.txt
	printf '\n== BenchmarkIsolation (runc and gVisor, one process)  [load average %s]\n' "$(loadavg)" | tee -a "$raw" >&2
	(cd internal/hub && "$hub_test" -test.run '^$' -test.bench '^BenchmarkIsolation$' -test.benchtime 1x -test.count 1 \
		-test.timeout 30m -test.v) 2>&1 | grep -v 'logger.go' | tee "$iso_out" | tee -a "$raw" >&2 || die "the isolation benchmark failed (see $raw)"
	# isov ISO UNIT: the value BenchmarkIsolation/ISO reported with UNIT.
	isov() {
		awk -v name="$1" -v unit="$2" '
			$1 ~ "^BenchmarkIsolation/" name "(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$iso_out"
	}
	{
		printf '\n%-40s %14s %14s %10s  %s\n' "runc vs gVisor (ms; memory MiB)" runc gvisor ratio target
		for m in cold-p50-ms warm-p50-ms exec-p50-ms exec-p99-ms write-256MiB-ms python-ms untar-10k-ms idle-MiB; do
			r=$(isov runc "$m") g=$(isov gvisor "$m") t=''
			case $m in
			exec-p50-ms) t="gvisor <= 2x runc: $(judge "$(ratio "$g" "$r")" 2)" ;;
			warm-p50-ms) t="gvisor <= 50 ms: $(judge "$g" 50)" ;;
			idle-MiB) t="gvisor <= 2x runc: $(judge "$(ratio "$g" "$r")" 2)" ;;
			esac
			printf '%-40s %14s %14s %10s  %s\n' "$m" "${r:-n/a}" "${g:-skipped (make sandbox-runtime)}" "$(ratio "$g" "$r")" "$t"
		done
	} | tee -a "$raw"
fi
echo "(raw results: ${raw#"$root"/})" >&2
