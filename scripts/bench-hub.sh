#!/usr/bin/env bash
# make bench-hub: the hub's benchmarks (issue 4), side by side with ssh to
# localhost over a multiplexed master connection, all in one run:
#
#   * the chat path: a long-lived Go client exec'ing `true` through the hub,
#     alternating with `true` in a new session of one persistent Go ssh
#     connection to the same sshd (BenchmarkChatPath);
#   * whole-process `agentctl --hub … --machine … exec -- true` through a
#     bin/agenthub serve on 127.0.0.1 and a paired bin/agentd run, against
#     `ssh true` (the sshd setup of scripts/bench.sh);
#   * 1 GiB of stdout (head -c 1G /dev/zero) through the hub against ssh,
#     and the hub process's CPU time per GiB it relayed;
#   * the Go benchmarks of internal/hub (exec and 256 MiB stdout through a
#     real hub and tunnel, in-process client) and TestIdleTunnels: hub memory
#     per idle tunnel with N daemons in a child process, and the time for all
#     N to be back after a hub restart (quick backoff, and the default one);
#   * hub replicas on one PostgreSQL (internal/hub/replica): System.Info
#     sent to the replica holding the tunnel vs one hop away, with and
#     without the route cache, interleaved (BenchmarkRoutedCall); and
#     REPLICA_MACHINES machines spread round robin over three `agenthub
#     serve` replica processes, one killed with SIGKILL, until every machine
#     it held is back on a survivor and reachable through both survivors
#     (TestReplicaKill; the daemons' default backoff).
#
# Raw results: .bench/hub-results.txt. Knobs (env): LAT_RUNS (runs per
# command for latency, default 300), THR_RUNS (1 GiB runs per command,
# default 3), TUNNELS (idle tunnels, default 1000), EXEC_BENCHTIME (default
# 300x), STDOUT_BENCHTIME (default 3x), SSH_PORT (first port tried, 2222),
# HUB_PORT (first port tried, 18443), CHAT_BENCHTIME (default 300x),
# HOP_BENCHTIME (default 2000x), REPLICA_MACHINES (default 1000), NO_SSH=1,
# NO_GO=1, NO_REPLICAS=1. The replica figures need PostgreSQL's server
# binaries (initdb, pg_ctl); without them those tests skip, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/bin
outdir=$root/.bench
raw=$outdir/hub-results.txt

LAT_RUNS=${LAT_RUNS:-300}
THR_RUNS=${THR_RUNS:-3}
TUNNELS=${TUNNELS:-1000}
EXEC_BENCHTIME=${EXEC_BENCHTIME:-300x}
STDOUT_BENCHTIME=${STDOUT_BENCHTIME:-3x}
CHAT_BENCHTIME=${CHAT_BENCHTIME:-300x}
HOP_BENCHTIME=${HOP_BENCHTIME:-2000x}
REPLICA_MACHINES=${REPLICA_MACHINES:-1000}
NO_REPLICAS=${NO_REPLICAS:-}
SSH_PORT=${SSH_PORT:-2222}
HUB_PORT=${HUB_PORT:-18443}
NO_SSH=${NO_SSH:-}
NO_GO=${NO_GO:-}

GiB=1073741824

die() { echo "bench-hub: $*" >&2; exit 1; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'; }
say() { printf '\n== %s  [load average %s]\n' "$*" "$(loadavg)" | tee -a "$raw" >&2; }
note() { echo "$*" | tee -a "$raw" >&2; }

# ---------------------------------------------------------------- setup

command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$outdir"
: >"$raw"
make build >>"$raw" 2>&1 || die "make build failed (see $raw)"
for b in agentd agentctl agenthub; do
	[[ -x $bin/$b ]] || die "$bin/$b is missing after make build"
done

load_start=$(loadavg)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-bench-hub.XXXXXX")
hub_pid='' daemon_pid='' sshd_pid='' ssh_master=''

cleanup() {
	local rc=$?
	set +e
	if [[ -n $ssh_master ]]; then
		ssh "${ssh_base[@]}" -O exit "$ssh_dest" >/dev/null 2>&1
	fi
	for pid in $daemon_pid $hub_pid $sshd_pid; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	rm -rf "$tmp"
	if ((rc != 0)); then
		echo "bench-hub: failed (exit $rc); partial results in $raw" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

apt_install() {
	if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
		return 1
	fi
	note "installing $* with apt-get"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$raw" 2>&1 ||
		{ apt-get update -qq >>"$raw" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$raw" 2>&1; }
}

{
	echo "agentd hub benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
	echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr); $(go version)"
	echo "load average at start: $load_start"
} | tee -a "$raw" >&2

now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

declare -A R

# ---------------------------------------------------------------- Go benchmarks

go_out=$tmp/go-bench.txt
: >"$go_out"
if [[ -z $NO_GO ]]; then
	say "Go benchmarks: internal/hub (exec $EXEC_BENCHTIME, stdout 256 MiB $STDOUT_BENCHTIME)"
	go test -run '^$' -bench '^BenchmarkHubExecTrue$' -benchtime "$EXEC_BENCHTIME" -count 1 -timeout 10m ./internal/hub/ 2>&1 | tee -a "$go_out" | tee -a "$raw" >&2 ||
		die "BenchmarkHubExecTrue failed"
	go test -run '^$' -bench '^BenchmarkHubStdout$' -benchtime "$STDOUT_BENCHTIME" -count 1 -timeout 10m ./internal/hub/ 2>&1 | tee -a "$go_out" | tee -a "$raw" >&2 ||
		die "BenchmarkHubStdout failed"
	say "idle tunnels: $TUNNELS daemons in a child process, then two hub restarts"
	AGENTD_BENCH_TUNNELS=$TUNNELS go test -run '^TestIdleTunnels$' -count 1 -v -timeout 10m ./internal/hub/ 2>&1 | tee -a "$go_out" | tee -a "$raw" >&2 ||
		die "TestIdleTunnels with $TUNNELS tunnels failed (try a smaller TUNNELS=)"
	if [[ -z $NO_REPLICAS ]]; then
		say "hub replicas on PostgreSQL: routed call on the holder vs one hop away ($HOP_BENCHTIME, interleaved)"
		go test -run '^$' -bench '^BenchmarkRoutedCall$' -benchtime "$HOP_BENCHTIME" -count 1 -timeout 10m ./internal/hub/replica/ 2>&1 |
			tee -a "$go_out" | tee -a "$raw" >&2 || die "BenchmarkRoutedCall failed"
		say "hub replicas: $REPLICA_MACHINES machines over three agenthub processes, one killed (SIGKILL)"
		AGENTD_BENCH_REPLICA_MACHINES=$REPLICA_MACHINES AGENTD_BENCH_AGENTHUB=$bin/agenthub \
			go test -run '^TestReplicaKill$' -count 1 -v -timeout 10m ./internal/hub/replica/ 2>&1 |
			tee -a "$go_out" | tee -a "$raw" >&2 || die "TestReplicaKill with $REPLICA_MACHINES machines failed (try a smaller REPLICA_MACHINES=)"
	fi
fi

gobench() {
	awk -v name="$1" -v unit="$2" '
		$1 ~ "^Benchmark" name "(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$go_out"
}
# kv PREFIX KEY [MATCH]: value of KEY=… on the first line starting with PREFIX (and containing MATCH).
kv() {
	awk -v p="$1" -v k="$2" -v m="${3:-}" 'index($0, p) == 1 && index($0, m) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { print substr($i, length(k) + 2); exit } }' "$go_out"
}
R[go_exec_p50]=$(gobench HubExecTrue p50-ms)
R[go_exec_p99]=$(gobench HubExecTrue p99-ms)
R[go_stdout]=$(gobench HubStdout MB/s)
R[tun_n]=$(kv 'IDLE-TUNNELS ' n)
R[tun_kib]=$(kv 'IDLE-TUNNELS ' per_tunnel_kib)
R[tun_heap]=$(kv 'IDLE-TUNNELS ' heap_kib)
R[tun_stack]=$(kv 'IDLE-TUNNELS ' stack_kib)
R[tun_gor]=$(kv 'IDLE-TUNNELS ' goroutines)
R[tun_daemon_kib]=$(kv 'IDLE-TUNNELS-DAEMONS ' per_tunnel_kib)
R[restart_quick]=$(kv 'RESTART ' back_s backoff=quick)
R[restart_default]=$(kv 'RESTART ' back_s backoff=default)
R[hop_holder]=$(gobench RoutedCall holder-p50-ms)
R[hop_hop]=$(gobench RoutedCall hop-p50-ms)
R[hop_nocache]=$(gobench RoutedCall hop-nocache-p50-ms)
R[hop_lookup]=$(gobench RoutedCall lookup-p50-ms)
R[hop_extra]=$(gobench RoutedCall extra-hop-ms)
R[hop_extra_nocache]=$(gobench RoutedCall extra-hop-nocache-ms)
R[kill_n]=$(kv 'REPLICA-KILL ' n)
R[kill_victim]=$(kv 'REPLICA-KILL ' on_victim)
R[kill_back_p50]=$(kv 'REPLICA-KILL ' back_p50_s)
R[kill_back_p100]=$(kv 'REPLICA-KILL ' back_p100_s)
R[kill_route_p50]=$(kv 'REPLICA-KILL ' route_p50_s)
R[kill_route_p100]=$(kv 'REPLICA-KILL ' route_p100_s)
R[kill_reach_p50]=$(kv 'REPLICA-KILL ' routable_p50_s)
R[kill_reach_p100]=$(kv 'REPLICA-KILL ' routable_p100_s)

# ---------------------------------------------------------------- hub and agentd

say "starting bin/agenthub serve on 127.0.0.1 and a paired bin/agentd run"
port=$HUB_PORT
while port_busy "$port"; do
	((port++ < HUB_PORT + 50)) || die "no free port in $HUB_PORT..$port"
done
hub_url=http://127.0.0.1:$port
export AGENTHUB_DB=$tmp/hub.db
token=$("$bin/agenthub" init --org bench 2>>"$raw") || die "agenthub init failed (see $raw)"
[[ -n $token ]] || die "agenthub init printed no token"
"$bin/agenthub" serve --listen "127.0.0.1:$port" --log-level warn 2>"$tmp/hub.log" &
hub_pid=$!
for _ in $(seq 200); do
	port_busy "$port" && break
	kill -0 "$hub_pid" 2>/dev/null || { cat "$tmp/hub.log" >&2; die "agenthub serve exited at startup"; }
	sleep 0.05
done
port_busy "$port" || die "agenthub did not listen on 127.0.0.1:$port within 10 s"

export AGENTD_TOKEN=$token
code=$("$bin/agentctl" --hub "$hub_url" admin pair-code create 2>>"$raw") || die "agentctl admin pair-code create failed (see $raw)"
export AGENTD_CONFIG_DIR=$tmp/agentd-config AGENTD_STATE_DIR=$tmp/agentd-state
ws=$tmp/ws
mkdir -p "$ws"
machine=$("$bin/agentd" pair --hub "$hub_url" --code "$code" --name bench 2>>"$raw") || die "agentd pair failed (see $raw)"
"$bin/agentd" run --workspace "$ws" --socket - --log-level warn 2>"$tmp/agentd.log" &
daemon_pid=$!
ctl() { "$bin/agentctl" --hub "$hub_url" --machine "$machine" "$@"; }
online=''
for _ in $(seq 200); do
	kill -0 "$daemon_pid" 2>/dev/null || { cat "$tmp/agentd.log" >&2; die "agentd run exited at startup"; }
	if [[ $(ctl exec -- echo ok 2>/dev/null) == ok ]]; then
		online=1
		break
	fi
	sleep 0.05
done
[[ -n $online ]] || { cat "$tmp/hub.log" "$tmp/agentd.log" >&2; die "machine $machine not reachable through the hub within 10 s"; }
note "hub $hub_url (pid $hub_pid), machine $machine (agentd pid $daemon_pid)"

# ---------------------------------------------------------------- sshd (as in scripts/bench.sh)

ssh_ok=''
ssh_base=()
ssh_dest=''
source "$(dirname "${BASH_SOURCE[0]}")/lib/sshd.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/latency.sh"

if [[ -z $NO_SSH ]]; then
	say "starting sshd on loopback with throwaway keys"
	start_sshd && ssh_ok=1 || true
fi

# ---------------------------------------------------------------- the chat path

if [[ -n $ssh_ok && -z $NO_GO ]]; then
	say "the chat path: in-process client through the hub vs a persistent Go ssh connection ($CHAT_BENCHTIME, alternating)"
	AGENTD_BENCH_SSH=$(id -un)@127.0.0.1:$ssh_port AGENTD_BENCH_SSH_KEY=$ssh_key \
		go test -run '^$' -bench '^BenchmarkChatPath$' -benchtime "$CHAT_BENCHTIME" -count 1 -timeout 10m ./internal/hub/ 2>&1 |
		tee -a "$go_out" | tee -a "$raw" >&2 || die "BenchmarkChatPath failed"
	R[chat_hub_p50]=$(gobench ChatPath hub-p50-ms)
	R[chat_ssh_p50]=$(gobench ChatPath ssh-p50-ms)
	R[chat_hub_p99]=$(gobench ChatPath hub-p99-ms)
	R[chat_ssh_p99]=$(gobench ChatPath ssh-p99-ms)
fi

if ! command -v hyperfine >/dev/null; then
	apt_install hyperfine || note "hyperfine not available: timing latency with a shell loop instead"
fi

# ---------------------------------------------------------------- latency

say "round trip of 'exec true' ($LAT_RUNS runs per command, interleaved)"
lat_names=('agentctl --hub exec -- true' 'agentctl version (startup, no RPC)' 'true (fork+exec floor)')
lat_keys=(hub_exec ctl_version true_exec)
lat_cmds=("$bin/agentctl --hub $hub_url --machine $machine exec -- true" "$bin/agentctl version" "true")
if [[ -n $ssh_ok ]]; then
	lat_names+=('ssh (multiplexed) true') lat_keys+=(ssh_exec) lat_cmds+=("ssh ${ssh_base[*]} $ssh_dest true")
fi
measure_latency 10

# ---------------------------------------------------------------- stdout 1 GiB

say "stdout: 1 GiB of /dev/zero ($THR_RUNS interleaved runs each)"
got=$(ctl exec -- head -c 1G /dev/zero | wc -c)
[[ $got == "$GiB" ]] || die "agentctl --hub exec -- head -c 1G /dev/zero delivered $got bytes, want $GiB"
t_hub() { ctl exec -- head -c 1G /dev/zero >/dev/null; }
t_ssh() { sshc 'head -c 1G /dev/zero' >/dev/null; }
t_pipe() { head -c 1G /dev/zero | cat >/dev/null; }
names=(hub_stdout pipe_stdout) fns=(t_hub t_pipe)
[[ -n $ssh_ok ]] && names+=(ssh_stdout) fns+=(t_ssh)
declare -A times=()
# The hub process's CPU time (user + system, in clock ticks) while it relays.
hub_ticks() { awk '{ print $14 + $15 }' "/proc/$hub_pid/stat"; }
hub_cpu=0
for ((r = 0; r < THR_RUNS; r++)); do
	for i in "${!names[@]}"; do
		c0=$(hub_ticks)
		t0=$(now_us)
		"${fns[$i]}" || die "${names[$i]} failed"
		t1=$(now_us)
		c1=$(hub_ticks)
		times[$i]+="$((t1 - t0)) "
		[[ ${names[$i]} == hub_stdout ]] && hub_cpu=$((hub_cpu + c1 - c0))
	done
done
R[hub_cpu_per_gib]=$(awk -v t="$hub_cpu" -v hz="$(getconf CLK_TCK)" -v n="$THR_RUNS" 'BEGIN { printf "%.2f", t / hz / n }')
for i in "${!names[@]}"; do
	note "  ${names[$i]}: ${times[$i]}(µs)"
	med=$(tr ' ' '\n' <<<"${times[$i]}" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR - 1) / 2) + 1] }')
	R[${names[$i]}_mbps]=$(awk -v b="$GiB" -v us="$med" 'BEGIN { printf "%.0f", b / us }')
done

# ---------------------------------------------------------------- summary

met=0 missed=0
# judge VALUE OP TARGET: MET/MISSED (OP is <= or >=).
judge() {
	local val=$1 op=$2 target=$3
	if [[ -z $val ]]; then
		echo "n/a ($op $target)"
	elif awk -v a="$val" -v t="$target" -v op="$op" 'BEGIN { exit !(op == "<=" ? a <= t : a >= t) }'; then
		echo "MET ($op $target)"
	else
		echo "MISSED ($op $target)"
	fi
}
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || true; }
line() { printf '%-46s %-14s %-34s %s\n' "$@"; }

summary() {
	local r v
	local sep
	sep=$(printf '%.0s-' {1..120})
	line "measure" "hub" "baseline (same run)" "target"
	echo "$sep"
	r=$(ratio "${R[chat_hub_p50]:-}" "${R[chat_ssh_p50]:-}")
	v=$(judge "$r" "<=" 0.6)
	line "chat path: exec true p50, long-lived client" "${R[chat_hub_p50]:-n/a} ms" "Go ssh, session per call: ${R[chat_ssh_p50]:-n/a} ms" "hub/ssh ${r:-n/a}x: $v"
	line "chat path: exec true p99" "${R[chat_hub_p99]:-n/a} ms" "Go ssh: ${R[chat_ssh_p99]:-n/a} ms" ""
	r=$(ratio "${R[hub_exec_p50]:-}" "${R[ssh_exec_p50]:-}")
	v=$(judge "$r" "<=" 1.0)
	line "exec true p50, agentctl process" "${R[hub_exec_p50]:-n/a} ms" "ssh mux: ${R[ssh_exec_p50]:-n/a} ms" "hub/ssh ${r:-n/a}x: $v"
	line "exec true p99, agentctl process" "${R[hub_exec_p99]:-n/a} ms" "ssh mux: ${R[ssh_exec_p99]:-n/a} ms" ""
	line "  floor: agentctl version (no RPC)" "${R[ctl_version_p50]:-n/a} ms" "true: ${R[true_exec_p50]:-n/a} ms" ""
	line "exec true p50/p99, in-process Go client" "${R[go_exec_p50]:-n/a}/${R[go_exec_p99]:-n/a} ms" "" ""
	r=$(ratio "${R[hub_stdout_mbps]:-}" "${R[ssh_stdout_mbps]:-}")
	v=$(judge "$r" ">=" 1.0)
	line "stdout 1 GiB, agentctl exec" "${R[hub_stdout_mbps]:-n/a} MB/s" "ssh mux: ${R[ssh_stdout_mbps]:-n/a} MB/s" "hub/ssh ${r:-n/a}x: $v"
	v=$(judge "${R[hub_cpu_per_gib]:-}" "<=" 0.6)
	line "  hub CPU per GiB relayed" "${R[hub_cpu_per_gib]:-n/a} s" "user + system of agenthub serve" "$v s"
	line "" "" "head | cat: ${R[pipe_stdout_mbps]:-n/a} MB/s" ""
	line "stdout 256 MiB, in-process Go client" "${R[go_stdout]:-n/a} MB/s" "" ""
	v=$(judge "${R[tun_kib]:-}" "<=" 64)
	line "hub memory per idle tunnel (N=${R[tun_n]:-?})" "${R[tun_kib]:-n/a} KiB" "heap ${R[tun_heap]:-?} + stacks ${R[tun_stack]:-?} KiB" "$v KiB"
	line "  goroutines per tunnel (hub); daemon side" "${R[tun_gor]:-n/a}" "daemon: ${R[tun_daemon_kib]:-n/a} KiB/tunnel" ""
	v=$(judge "${R[restart_default]:-}" "<=" 10)
	line "all N back after hub restart, default backoff" "${R[restart_default]:-n/a} s" "N=${R[tun_n]:-?}, Initial 1 s" "$v s"
	v=$(judge "${R[restart_quick]:-}" "<=" 10)
	line "all N back after hub restart, quick backoff" "${R[restart_quick]:-n/a} s" "N=${R[tun_n]:-?}, Initial 20 ms" "$v s"
	v=$(judge "${R[hop_extra]:-}" "<=" 0.3)
	line "replicas: System.Info p50, holder vs one hop" "${R[hop_hop]:-n/a} ms" "holder: ${R[hop_holder]:-n/a} ms" "extra hop ${R[hop_extra]:-n/a} ms: $v ms"
	line "  one hop, route cache off" "${R[hop_nocache]:-n/a} ms" "route query alone: ${R[hop_lookup]:-n/a} ms" "extra hop ${R[hop_extra_nocache]:-n/a} ms"
	v=$(judge "${R[kill_reach_p100]:-}" "<=" 10)
	line "replica killed: all its machines routable" "${R[kill_reach_p100]:-n/a} s" "p50 ${R[kill_reach_p50]:-n/a} s (${R[kill_victim]:-?} of N=${R[kill_n]:-?})" "$v s"
	line "  tunnels back p50/p100; routes moved" "${R[kill_back_p50]:-n/a}/${R[kill_back_p100]:-n/a} s" "routes p50/p100 ${R[kill_route_p50]:-n/a}/${R[kill_route_p100]:-n/a} s" ""
	echo "$sep"
	echo "MB = 10^6 bytes. Latency: $LAT_RUNS runs per command; stdout: median of $THR_RUNS interleaved runs."
	echo "Restart time: from the old hub's shutdown starting to all N tunnels registered on the new one."
	echo "Replicas: three hubs on one PostgreSQL. Hop: calls interleaved in one loop (in-process hubs, a real agentd)."
	echo "Kill: from SIGKILL of one of three agenthub serve processes until System.Info answers through both survivors"
	echo "for every machine it held (the daemons' default backoff, a round-robin balancer skipping refused backends)."
	echo "load average at start: $load_start; at the end: $(loadavg) ($(nproc) CPUs)."
}

say "summary"
summary | tee "$tmp/summary.txt" >/dev/null
met=$(grep -c 'MET (' "$tmp/summary.txt" || true)
missed=$(grep -c 'MISSED (' "$tmp/summary.txt" || true)
echo "targets met: $met, missed: $missed" >>"$tmp/summary.txt"
tee -a "$raw" <"$tmp/summary.txt"
echo "(raw results: ${raw#"$root"/})" >&2
