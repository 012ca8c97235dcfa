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
#   * 1 GiB from a TCP server on loopback through `agentctl port forward`
#     against `ssh -L` on the same multiplexed master, and the hub's CPU
#     time per GiB forwarded (needs python3 for the server and reader);
#   * HTTP through a preview URL (agenthub serve --preview-listen on
#     loopback, `agentctl port expose PORT --access public`) against the
#     same server through `ssh -L` on the multiplexed master: p50/p99 of
#     small GETs (a 1-byte file) on one kept-alive connection and on a new
#     connection each, interleaved request by request, and a 256 MiB
#     download with curl, interleaved (python3 -m http.server --protocol
#     HTTP/1.1 serves both; needs python3 and curl);
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
# NO_GO=1, NO_REPLICAS=1, PREVIEW_GETS (small GETs per way and target,
# default 200), PREVIEW=1 (only the preview figures: no Go benchmarks,
# latency, stdout or port forward), NO_PREVIEW=1. The replica figures need PostgreSQL's server
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
PREVIEW=${PREVIEW:-}
NO_PREVIEW=${NO_PREVIEW:-}
PREVIEW_GETS=${PREVIEW_GETS:-200}
[[ -n $PREVIEW && -n $NO_PREVIEW ]] && { echo "bench-hub: PREVIEW=1 and NO_PREVIEW=1 exclude each other" >&2; exit 2; }
[[ -n $PREVIEW ]] && NO_GO=1

GiB=1073741824
MiB256=268435456

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
	for pid in ${fwd_pid:-} ${zero_pid:-} ${web_pid:-} ${one_pid:-} $daemon_pid $hub_pid $sshd_pid; do
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
# The hub process's CPU time (user + system, in clock ticks) while it relays.
hub_ticks() { awk '{ print $14 + $15 }' "/proc/$hub_pid/stat"; }
free_port() { local p=$1; while port_busy "$p"; do ((p++)); done; echo "$p"; }
# median of the whitespace-separated numbers on stdin
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR - 1) / 2) + 1] }'; }

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
	go test -run '^$' -bench '^BenchmarkHubPortForward$' -benchtime "$STDOUT_BENCHTIME" -count 1 -timeout 10m ./internal/hub/ 2>&1 | tee -a "$go_out" | tee -a "$raw" >&2 ||
		die "BenchmarkHubPortForward failed"
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
R[go_forward]=$(gobench HubPortForward/messages MB/s)
R[go_forward_cpu]=$(gobench HubPortForward/messages cpu-s/GiB)
R[go_forward_streams]=$(gobench HubPortForward/streams MB/s)
R[go_forward_streams_cpu]=$(gobench HubPortForward/streams cpu-s/GiB)
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
# Previews get a listener of their own (a free loopback port above the hub's).
preview_port=$((port + 1))
while port_busy "$preview_port"; do
	((preview_port++ < port + 50)) || die "no free port for the preview listener in $((port + 1))..$preview_port"
done
export AGENTHUB_DB=$tmp/hub.db
token=$("$bin/agenthub" init --org bench 2>>"$raw") || die "agenthub init failed (see $raw)"
[[ -n $token ]] || die "agenthub init printed no token"
"$bin/agenthub" serve --listen "127.0.0.1:$port" --preview-listen "127.0.0.1:$preview_port" --log-level warn 2>"$tmp/hub.log" &
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
note "hub $hub_url (previews on 127.0.0.1:$preview_port; pid $hub_pid), machine $machine (agentd pid $daemon_pid)"

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

# PREVIEW=1: only the preview figures below.
if [[ -z $PREVIEW ]]; then
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
fi

# ---------------------------------------------------------------- port forward 1 GiB

# A TCP server on loopback sends 1 GiB to each connection; a reader takes
# it through `agentctl port forward` (through the hub and the tunnel) and
# through `ssh -L` added to the multiplexed master, interleaved, with the
# hub process's CPU time while it relays.
if [[ -n $PREVIEW ]]; then
	: # PREVIEW=1: no port forward figures
elif command -v python3 >/dev/null; then
	say "port forward: 1 GiB from a loopback server ($THR_RUNS interleaved runs each)"
	zero_port=$(free_port 19100)
	python3 - "$zero_port" "$GiB" <<'PY' &
import socket, sys, threading
port, size = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(16)
buf = bytes(1 << 20)
def serve(c):
    left = size
    while left > 0:
        left -= c.send(buf[:min(left, len(buf))])
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
	zero_pid=$!
	fwd_port=$(free_port $((zero_port + 1)))
	# Not through ctl (a function): $! must be agentctl's own pid.
	"$bin/agentctl" --hub "$hub_url" --machine "$machine" port forward "$fwd_port:$zero_port" >"$tmp/forward.log" 2>&1 &
	fwd_pid=$!
	# The same agentctl with byte streams off: the connection's bytes in
	# gRPC messages through the hub's raw proxy and the tunnel's HTTP/2,
	# as before byte streams (the side-by-side baseline, same binaries).
	msg_port=$(free_port $((fwd_port + 1)))
	AGENTCTL_BYTE_STREAMS=0 "$bin/agentctl" --hub "$hub_url" --machine "$machine" port forward "$msg_port:$zero_port" >"$tmp/forward-msgs.log" 2>&1 &
	msg_pid=$!
	ssh_fwd_port=''
	if [[ -n $ssh_ok ]]; then
		ssh_fwd_port=$(free_port $((msg_port + 1)))
		ssh "${ssh_base[@]}" -O forward -L "$ssh_fwd_port:127.0.0.1:$zero_port" "$ssh_dest" 2>>"$raw" || ssh_fwd_port=''
	fi
	for _ in $(seq 100); do port_busy "$fwd_port" && port_busy "$msg_port" && break; sleep 0.05; done
	read_port() {
		python3 - "$1" <<'PY'
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
n, b = 0, bytearray(1 << 20)
while True:
    k = c.recv_into(b)
    if k == 0:
        break
    n += k
print(n)
PY
	}
	[[ $(read_port "$fwd_port") == "$GiB" ]] || die "agentctl port forward did not deliver 1 GiB (see $tmp/forward.log)"
	[[ $(read_port "$msg_port") == "$GiB" ]] || die "agentctl port forward (messages) did not deliver 1 GiB (see $tmp/forward-msgs.log)"
	fnames=(hub_forward hub_forward_msgs) fports=("$fwd_port" "$msg_port")
	[[ -n $ssh_fwd_port ]] && fnames+=(ssh_forward) fports+=("$ssh_fwd_port")
	declare -A ftimes=() fcpu=()
	for ((r = 0; r < THR_RUNS; r++)); do
		for i in "${!fnames[@]}"; do
			c0=$(hub_ticks)
			t0=$(now_us)
			got=$(read_port "${fports[$i]}")
			t1=$(now_us)
			c1=$(hub_ticks)
			[[ $got == "$GiB" ]] || die "${fnames[$i]} delivered $got bytes"
			ftimes[$i]+="$((t1 - t0)) "
			fcpu[$i]=$((${fcpu[$i]:-0} + c1 - c0))
		done
	done
	R[hub_fwd_cpu_per_gib]=$(awk -v t="${fcpu[0]}" -v hz="$(getconf CLK_TCK)" -v n="$THR_RUNS" 'BEGIN { printf "%.2f", t / hz / n }')
	R[hub_fwd_msgs_cpu_per_gib]=$(awk -v t="${fcpu[1]}" -v hz="$(getconf CLK_TCK)" -v n="$THR_RUNS" 'BEGIN { printf "%.2f", t / hz / n }')
	for i in "${!fnames[@]}"; do
		note "  ${fnames[$i]}: ${ftimes[$i]}(µs)"
		med=$(tr ' ' '\n' <<<"${ftimes[$i]}" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR - 1) / 2) + 1] }')
		R[${fnames[$i]}_mbps]=$(awk -v b="$GiB" -v us="$med" 'BEGIN { printf "%.0f", b / us }')
	done
	[[ -n $ssh_fwd_port ]] && ssh "${ssh_base[@]}" -O cancel -L "$ssh_fwd_port:127.0.0.1:$zero_port" "$ssh_dest" 2>>"$raw" || true
	kill "$fwd_pid" "$msg_pid" "$zero_pid" 2>/dev/null || true
	wait "$fwd_pid" "$msg_pid" "$zero_pid" 2>/dev/null || true
else
	note "python3 not found: no port forward figures"
fi

# ---------------------------------------------------------------- preview HTTP

# python3 -m http.server (HTTP/1.1, so connections stay open) serves a
# 1-byte file and a 256 MiB one from a temp dir on loopback. The same
# server is reached through a public preview URL (`agentctl port expose`,
# the hub's --preview-listen, the tunnel, agentd) and through `ssh -L` on
# the multiplexed master. Small GETs: one Python process takes the targets
# in turn, in blocks of 10 requests, on one kept-alive connection per
# target and on a new connection per request (the client's: the hub keeps
# its own connections to the server open between requests, ssh -L does not). 256 MiB: curl, interleaved, the median of
# THR_RUNS; and the hub's CPU time while it relays the preview downloads.
if [[ -n $NO_PREVIEW ]]; then
	:
elif ! command -v python3 >/dev/null || ! command -v curl >/dev/null; then
	note "python3 or curl not found: no preview figures"
else
	say "preview HTTP: small GETs ($PREVIEW_GETS per way, blocks of 10 in turn) and 256 MiB ($THR_RUNS interleaved runs) vs ssh -L"
	webdir=$tmp/web
	mkdir -p "$webdir"
	printf x >"$webdir/small"
	head -c "$MiB256" /dev/zero >"$webdir/big"
	web_port=$(free_port 19200)
	python3 -m http.server --protocol HTTP/1.1 --bind 127.0.0.1 --directory "$webdir" "$web_port" >"$tmp/web.log" 2>&1 &
	web_pid=$!
	# A second server answers every request with one write (status line,
	# headers and the 1-byte body in one send): http.server sends headers
	# and body in two, so with Nagle on its socket the body waits for the
	# ACK of the headers, which the receiving kernel may delay (~40 ms).
	one_port=$(free_port $((web_port + 1)))
	python3 - "$one_port" >"$tmp/one.log" 2>&1 <<'PY' &
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
def serve(c):
    f = c.makefile("rb")
    while f.readline():
        while f.readline() not in (b"\r\n", b""):
            pass
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\r\nx")
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
	one_pid=$!
	for _ in $(seq 100); do port_busy "$web_port" && port_busy "$one_port" && break; sleep 0.05; done
	port_busy "$web_port" || die "python3 -m http.server did not listen on 127.0.0.1:$web_port"
	port_busy "$one_port" || die "the one-write server did not listen on 127.0.0.1:$one_port (see $tmp/one.log)"
	preview_url=$(ctl port expose "$web_port" --access public --ttl 0 2>>"$raw") || die "agentctl port expose $web_port failed (see $raw)"
	preview_url=${preview_url%/}
	one_url=$(ctl port expose "$one_port" --access public --ttl 0 2>>"$raw") || die "agentctl port expose $one_port failed (see $raw)"
	one_url=${one_url%/}
	note "preview URL: ${preview_url%/p/*}/p/… (public) for 127.0.0.1:$web_port"
	[[ $(curl -sS --max-time 10 "$preview_url/small") == x ]] || die "GET $preview_url/small did not answer the 1-byte file"
	pnames=(hub_preview) purls=("$preview_url") onames=(hub_one) ourls=("$one_url")
	ssh_web_port='' ssh_one_port=''
	if [[ -n $ssh_ok ]]; then
		ssh_web_port=$(free_port $((one_port + 1)))
		ssh_one_port=$(free_port $((ssh_web_port + 1)))
		if ssh "${ssh_base[@]}" -O forward -L "$ssh_web_port:127.0.0.1:$web_port" -L "$ssh_one_port:127.0.0.1:$one_port" "$ssh_dest" 2>>"$raw"; then
			pnames+=(ssh_preview) purls+=("http://127.0.0.1:$ssh_web_port")
			onames+=(ssh_one) ourls+=("http://127.0.0.1:$ssh_one_port")
			[[ $(curl -sS --max-time 10 "http://127.0.0.1:$ssh_web_port/small") == x ]] || die "GET through ssh -L did not answer the 1-byte file"
		else
			ssh_web_port='' ssh_one_port=''
		fi
	fi
	# Small GETs: prints "NAME WAY p50-ms p99-ms" per target and way.
	get_args=()
	for i in "${!pnames[@]}"; do get_args+=("${pnames[$i]}" "${purls[$i]}/small"); done
	for i in "${!onames[@]}"; do get_args+=("${onames[$i]}" "${ourls[$i]}/small"); done
	python3 - "$PREVIEW_GETS" "${get_args[@]}" >"$tmp/gets.txt" 2>>"$raw" <<'PY' || die "small GETs failed (see $raw)"
import http.client, sys, time, urllib.parse
n = int(sys.argv[1])
targets = [(sys.argv[i], urllib.parse.urlsplit(sys.argv[i + 1])) for i in range(2, len(sys.argv), 2)]
def get(conn, u):
    conn.request("GET", u.path, headers={"Host": u.netloc})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200 or body != b"x":
        raise SystemExit(f"GET {u.path}: {r.status} {body[:80]!r}")
    if r.will_close:
        raise SystemExit(f"GET {u.path}: the connection was not kept alive")
keep = {name: http.client.HTTPConnection(u.hostname, u.port, timeout=30) for name, u in targets}
times = {(name, way): [] for name, _ in targets for way in ("keepalive", "newconn")}
# Blocks of 10 requests per target and way, the targets and ways in turn:
# a connection's requests follow each other back to back as a page's do
# (the kernel acknowledges differently when a connection idles between
# requests), and every target sees the same load over the run. The first
# round warms up.
block = 10
for rnd in range((n + block - 1) // block + 1):
    for name, u in targets:
        for way in ("keepalive", "newconn"):
            for _ in range(block):
                t0 = time.perf_counter()
                if way == "keepalive":
                    get(keep[name], u)
                else:
                    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                    get(c, u)
                    c.close()
                if rnd > 0:
                    times[(name, way)].append(time.perf_counter() - t0)
for (name, way), ts in times.items():
    ts.sort()
    print(name, way, "%.3f" % (ts[(len(ts) - 1) // 2] * 1e3), "%.3f" % (ts[min(len(ts) - 1, int(len(ts) * 0.99))] * 1e3))
PY
	tee -a "$raw" <"$tmp/gets.txt" >&2
	while read -r name way p50 p99; do
		R[${name}_${way}_p50]=$p50
		R[${name}_${way}_p99]=$p99
	done <"$tmp/gets.txt"
	# 256 MiB, interleaved.
	declare -A ptimes=()
	prev_cpu=0
	for ((r = 0; r < THR_RUNS; r++)); do
		for i in "${!pnames[@]}"; do
			c0=$(hub_ticks)
			t0=$(now_us)
			got=$(curl -sS -o /dev/null -w '%{http_code} %{size_download}' "${purls[$i]}/big") || die "${pnames[$i]}: curl of 256 MiB failed"
			t1=$(now_us)
			c1=$(hub_ticks)
			[[ $got == "200 $MiB256" ]] || die "${pnames[$i]}: 256 MiB download answered '$got' (status, bytes)"
			ptimes[$i]+="$((t1 - t0)) "
			[[ ${pnames[$i]} == hub_preview ]] && prev_cpu=$((prev_cpu + c1 - c0))
		done
	done
	R[hub_preview_cpu_per_gib]=$(awk -v t="$prev_cpu" -v hz="$(getconf CLK_TCK)" -v n="$THR_RUNS" 'BEGIN { printf "%.2f", t / hz / n * 4 }')
	for i in "${!pnames[@]}"; do
		note "  ${pnames[$i]} 256 MiB: ${ptimes[$i]}(µs)"
		med=$(median <<<"${ptimes[$i]}")
		R[${pnames[$i]}_big_mbps]=$(awk -v b="$MiB256" -v us="$med" 'BEGIN { printf "%.0f", b / us }')
		R[${pnames[$i]}_big_s]=$(awk -v us="$med" 'BEGIN { printf "%.2f", us / 1e6 }')
	done
	[[ -n $ssh_web_port ]] && ssh "${ssh_base[@]}" -O cancel -L "$ssh_web_port:127.0.0.1:$web_port" -L "$ssh_one_port:127.0.0.1:$one_port" "$ssh_dest" 2>>"$raw" || true
	kill "$web_pid" "$one_pid" 2>/dev/null || true
	wait "$web_pid" "$one_pid" 2>/dev/null || true
	web_pid='' one_pid=''
	rm -f "$webdir/big"
fi

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
	r=$(ratio "${R[hub_forward_mbps]:-}" "${R[ssh_forward_mbps]:-}")
	v=$(judge "$r" ">=" 1.0)
	line "port forward 1 GiB, agentctl port forward" "${R[hub_forward_mbps]:-n/a} MB/s" "ssh -L (mux): ${R[ssh_forward_mbps]:-n/a} MB/s" "hub/ssh ${r:-n/a}x: $v"
	v=$(judge "${R[hub_fwd_cpu_per_gib]:-}" "<=" 0.6)
	line "  hub CPU per GiB forwarded" "${R[hub_fwd_cpu_per_gib]:-n/a} s" "user + system of agenthub serve" "$v s"
	line "  the same in messages (AGENTCTL_BYTE_STREAMS=0)" "${R[hub_forward_msgs_mbps]:-n/a} MB/s" "hub CPU ${R[hub_fwd_msgs_cpu_per_gib]:-n/a} s/GiB" ""
	r=$(ratio "${R[hub_preview_keepalive_p50]:-}" "${R[ssh_preview_keepalive_p50]:-}")
	v=$(judge "$r" "<=" 1.5)
	line "preview: small GET p50, kept-alive connection" "${R[hub_preview_keepalive_p50]:-n/a} ms" "ssh -L (mux): ${R[ssh_preview_keepalive_p50]:-n/a} ms" "hub/ssh ${r:-n/a}x: $v"
	line "  p99" "${R[hub_preview_keepalive_p99]:-n/a} ms" "ssh -L: ${R[ssh_preview_keepalive_p99]:-n/a} ms" ""
	r=$(ratio "${R[hub_preview_newconn_p50]:-}" "${R[ssh_preview_newconn_p50]:-}")
	v=$(judge "$r" "<=" 1.5)
	line "preview: small GET p50, new connection each" "${R[hub_preview_newconn_p50]:-n/a} ms" "ssh -L (mux): ${R[ssh_preview_newconn_p50]:-n/a} ms" "hub/ssh ${r:-n/a}x: $v"
	line "  p99" "${R[hub_preview_newconn_p99]:-n/a} ms" "ssh -L: ${R[ssh_preview_newconn_p99]:-n/a} ms" ""
	r=$(ratio "${R[hub_one_keepalive_p50]:-}" "${R[ssh_one_keepalive_p50]:-}")
	line "  the same, a server writing once (p50/p99)" "${R[hub_one_keepalive_p50]:-n/a}/${R[hub_one_keepalive_p99]:-n/a} ms" "ssh -L: ${R[ssh_one_keepalive_p50]:-n/a}/${R[ssh_one_keepalive_p99]:-n/a} ms" "hub/ssh ${r:-n/a}x"
	r=$(ratio "${R[hub_one_newconn_p50]:-}" "${R[ssh_one_newconn_p50]:-}")
	line "  the same, new connections (p50/p99)" "${R[hub_one_newconn_p50]:-n/a}/${R[hub_one_newconn_p99]:-n/a} ms" "ssh -L: ${R[ssh_one_newconn_p50]:-n/a}/${R[ssh_one_newconn_p99]:-n/a} ms" "hub/ssh ${r:-n/a}x"
	r=$(ratio "${R[hub_preview_big_mbps]:-}" "${R[ssh_preview_big_mbps]:-}")
	v=$(judge "$r" ">=" 0.8)
	line "preview: 256 MiB download (curl)" "${R[hub_preview_big_mbps]:-n/a} MB/s" "ssh -L (mux): ${R[ssh_preview_big_mbps]:-n/a} MB/s" "hub/ssh ${r:-n/a}x: $v"
	line "  time; hub CPU per GiB of preview" "${R[hub_preview_big_s]:-n/a} s; ${R[hub_preview_cpu_per_gib]:-n/a} s" "ssh -L: ${R[ssh_preview_big_s]:-n/a} s" ""
	line "port forward 256 MiB, in-process Go client" "${R[go_forward]:-n/a} MB/s" "CPU of hub+daemon+client: ${R[go_forward_cpu]:-n/a} s/GiB" ""
	line "  the same on byte streams" "${R[go_forward_streams]:-n/a} MB/s" "CPU of hub+daemon+client: ${R[go_forward_streams_cpu]:-n/a} s/GiB" ""
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
	echo "Preview: python3 -m http.server (HTTP/1.1) on loopback, a public URL on the hub's --preview-listen vs ssh -L;"
	echo "$PREVIEW_GETS GETs of a 1-byte file per target and way (Python http.client, blocks of 10 in turn); 256 MiB: median of $THR_RUNS."
	echo "Server writing once: status, headers and body in one send (http.server sends the body apart; see docs/performance.md)."
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
