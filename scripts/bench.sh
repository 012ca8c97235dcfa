#!/usr/bin/env bash
# make bench: measure agentd side by side with what an agent would use
# without it (ssh with a multiplexed connection, a plain pipe, cat, grep -r),
# all in one run on this machine, and print one summary table.
#
#   * the Go benchmarks (go test -bench) of every package that has some:
#     agentd's in-process client over the real unix socket;
#   * a bin/agentd serve on a temp socket, driven by the bin/agentctl process;
#   * an sshd on 127.0.0.1 with throwaway keys, driven by ssh over one
#     multiplexed master connection (ControlMaster/ControlPersist).
#
# Raw results: .bench/results.txt. Recorded figures: docs/performance.md.
# Knobs (env): BENCHTIME (go test -benchtime, default 2s), BIGTIME (the same
# for agentd's 256 MiB benchmarks, default 5x), LAT_RUNS (runs
# per command for latency, default 300), THR_RUNS (runs per command for
# throughput and search, default 5), SSH_PORT (first port tried, 2222),
# NO_SSH=1 (skip the ssh baselines), NO_GO=1 (skip the Go benchmarks),
# PROFILE=1 (also CPU-profile the agentd throughput benchmarks into .bench/
# and print their hot spots).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/bin
outdir=$root/.bench
raw=$outdir/results.txt

BENCHTIME=${BENCHTIME:-2s}
BIGTIME=${BIGTIME:-5x}
LAT_RUNS=${LAT_RUNS:-300}
THR_RUNS=${THR_RUNS:-5}
SSH_PORT=${SSH_PORT:-2222}
NO_SSH=${NO_SSH:-}
NO_GO=${NO_GO:-}
PROFILE=${PROFILE:-}

GiB=1073741824
MiB256=268435456
NEEDLE=zebra_quokka_42 # keep in step with agentd/bench_test.go

die() { echo "bench: $*" >&2; exit 1; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'; }
say() { printf '\n== %s  [load average %s]\n' "$*" "$(loadavg)" | tee -a "$raw" >&2; }
note() { echo "$*" | tee -a "$raw" >&2; }

# ---------------------------------------------------------------- setup

for b in agentd agentctl; do
	[[ -x $bin/$b ]] || die "$bin/$b is missing: run 'make build' (or 'make bench', which builds first)"
done
command -v go >/dev/null || die "go is not on PATH"

mkdir -p "$outdir"
: >"$raw"
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-bench.XXXXXX")
daemon='' sshd_pid='' ssh_master=''

cleanup() {
	local rc=$?
	set +e
	if [[ -n $ssh_master ]]; then
		ssh "${ssh_base[@]}" -O exit "$ssh_dest" >/dev/null 2>&1
	fi
	for pid in $sshd_pid $daemon; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	rm -rf "$tmp"
	if ((rc != 0)); then
		echo "bench: failed (exit $rc); partial results in $raw" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# apt_install PKG...: install missing Debian packages when we are root and apt exists.
apt_install() {
	if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
		return 1
	fi
	note "installing $* with apt-get"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$raw" 2>&1 ||
		{ apt-get update -qq >>"$raw" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$raw" 2>&1; }
}

if ! command -v hyperfine >/dev/null; then
	apt_install hyperfine || note "hyperfine not available: timing latency with a shell loop instead"
fi

{
	echo "agentd benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
	echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr); $(go version)"
	echo "load average at start: $(loadavg)"
} | tee -a "$raw" >&2

# Microseconds since the epoch, without forking (bash 5).
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }

# ---------------------------------------------------------------- Go benchmarks
# First, while nothing else is running.

declare -A R # results: key -> number

go_out=$tmp/go-bench.txt
: >"$go_out"
if [[ -z $NO_GO ]]; then
	say "Go benchmarks (go test -bench . -benchtime $BENCHTIME; agentd's 256 MiB ones $BIGTIME)"
	big='^Benchmark(Stdout|Write256MB|Read256MB)$'
	# agentd's 256 MiB benchmarks run a fixed number of times: under a
	# duration -benchtime one slow iteration would be the only sample.
	go test -run '^$' -bench . -skip "$big" -benchtime "$BENCHTIME" -count 1 -timeout 20m ./agentd/ 2>&1 | tee "$go_out" | tee -a "$raw" >&2 ||
		die "go test -bench ./agentd/ failed (output above and in $raw)"
	sync # the benchmarks before leave dirty pages (the search tree); the 256 MiB write should not pay for them
	go test -run '^$' -bench "$big" -benchtime "$BIGTIME" -count 1 -timeout 20m ./agentd/ 2>&1 | tee -a "$go_out" | tee -a "$raw" >&2 ||
		die "go test -bench ./agentd/ failed (output above and in $raw)"
	# Other packages with benchmarks (runner/, internal/files/, …).
	while IFS= read -r dir; do
		[[ $dir == ./agentd ]] && continue
		go test -run '^$' -bench . -benchtime "$BENCHTIME" -count 1 -timeout 20m "$dir/" 2>&1 | tee -a "$go_out" | tee -a "$raw" >&2 ||
			die "go test -bench $dir failed (output above and in $raw)"
	done < <(grep -rl --include='*_test.go' '^func Benchmark' . 2>/dev/null | grep -v '^./proto/' | xargs -r -n1 dirname | sort -u)
fi

# gobench NAME UNIT: the value next to UNIT on NAME's result line.
gobench() {
	awk -v name="$1" -v unit="$2" '
		$1 ~ "^Benchmark" name "(-[0-9]+)?$" { for (i = 3; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$go_out"
}
R[go_exec_p50]=$(gobench ExecTrue p50-ms)
R[go_exec_p99]=$(gobench ExecTrue p99-ms)
R[go_osexec_p50]=$(gobench OSExecTrue p50-ms)
R[go_osexec_p99]=$(gobench OSExecTrue p99-ms)
R[go_stdout]=$(gobench Stdout MB/s)
R[go_write]=$(gobench Write256MB MB/s)
R[go_read]=$(gobench Read256MB MB/s)
ns=$(gobench Search20k ns/op)
[[ -n $ns ]] && R[go_search]=$(awk -v n="$ns" 'BEGIN { printf "%.1f", n / 1e6 }')

# ---------------------------------------------------------------- agentd

say "starting bin/agentd serve on a temp socket"
sock=$tmp/agentd.sock
ws=$tmp/ws
mkdir -p "$ws"
AGENTD_STATE_DIR=$tmp/state "$bin/agentd" serve --listen "unix://$sock" --workspace "$ws" --log-level warn 2>"$tmp/agentd.log" &
daemon=$!
for _ in $(seq 200); do
	[[ -S $sock ]] && break
	kill -0 "$daemon" 2>/dev/null || { cat "$tmp/agentd.log" >&2; die "agentd serve exited at startup (log above)"; }
	sleep 0.05
done
[[ -S $sock ]] || die "agentd did not create $sock within 10 s"

ctl() { "$bin/agentctl" --addr "unix://$sock" "$@"; }

out=$(ctl exec -- echo ok 2>&1) && [[ $out == ok ]] ||
	die "agentctl exec does not work against this agentd: $out"

# ---------------------------------------------------------------- sshd

ssh_ok=''
ssh_base=() ssh_rc=()
ssh_dest=''
source "$(dirname "${BASH_SOURCE[0]}")/lib/sshd.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/latency.sh"

if [[ -z $NO_SSH ]]; then
	say "starting sshd on loopback with throwaway keys"
	start_sshd && ssh_ok=1 || true
fi

# ---------------------------------------------------------------- helpers

# interleave N NAME CMD [NAME CMD]...: runs each CMD (a shell function) N
# times, round-robin so that a noisy neighbour hits all of them alike, and
# stores the median wall time in microseconds in R[NAME].
interleave() {
	local n=$1
	shift
	local -a names=() cmds=()
	while (($#)); do
		names+=("$1") cmds+=("$2")
		shift 2
	done
	local -A times=()
	local r i t0 t1
	for ((r = 0; r < n; r++)); do
		for i in "${!names[@]}"; do
			# Untimed: no run pays for the write-back of dirty pages the
			# run before left (cat F >G leaves 256 MiB of them).
			sync
			t0=$(now_us)
			"${cmds[$i]}" || die "${names[$i]} failed (exit $?)"
			t1=$(now_us)
			times[$i]+="$((t1 - t0)) "
		done
	done
	for i in "${!names[@]}"; do
		note "  ${names[$i]}: ${times[$i]}(µs)"
		R[${names[$i]}]=$(tr ' ' '\n' <<<"${times[$i]}" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR - 1) / 2) + 1] }')
	done
}

# mbps KEY BYTES: MB/s (10^6 bytes) for R[KEY] microseconds.
mbps() { [[ -n ${R[$1]:-} ]] && awk -v b="$2" -v us="${R[$1]}" 'BEGIN { printf "%.0f", b / us }'; }

# ---------------------------------------------------------------- latency

say "round trip of 'exec true' ($LAT_RUNS runs per command)"
lat_names=('agentctl exec -- true' 'agentctl version (startup, no RPC)' 'true (fork+exec floor)')
lat_keys=(ctl_exec ctl_version true_exec)
lat_cmds=("$bin/agentctl --addr unix://$sock exec -- true" "$bin/agentctl version" "true")
if [[ -n $ssh_ok ]]; then
	lat_names+=('ssh (multiplexed) true') lat_keys+=(ssh_exec) lat_cmds+=("ssh ${ssh_base[*]} $ssh_dest true")
fi
measure_latency 20

if [[ -n $ssh_ok ]]; then
	t_ssh_rc() { ssh "${ssh_rc[@]}" "$ssh_dest" true; }
	note "for reference, ssh true with the user's rc files (10 runs):"
	interleave 10 ssh_rc_exec t_ssh_rc
	R[ssh_rc_exec_p50]=$(awk -v us="${R[ssh_rc_exec]}" 'BEGIN { printf "%.2f", us / 1000 }')
fi

# ---------------------------------------------------------------- stdout 1 GiB

say "stdout throughput: 1 GiB of /dev/zero ($THR_RUNS interleaved runs each)"
got=$(ctl exec -- head -c 1G /dev/zero | wc -c)
[[ $got == "$GiB" ]] || die "agentctl exec -- head -c 1G /dev/zero delivered $got bytes, want $GiB"
t_ctl_stdout() { ctl exec -- head -c 1G /dev/zero >/dev/null; }
t_ssh_stdout() { sshc 'head -c 1G /dev/zero' >/dev/null; }
t_pipe_stdout() { head -c 1G /dev/zero | cat >/dev/null; }
set_args=(ctl_stdout t_ctl_stdout pipe_stdout t_pipe_stdout)
[[ -n $ssh_ok ]] && set_args+=(ssh_stdout t_ssh_stdout)
interleave "$THR_RUNS" "${set_args[@]}"
for k in ctl_stdout ssh_stdout pipe_stdout; do R[${k}_mbps]=$(mbps "$k" "$GiB" || true); done

# ---------------------------------------------------------------- write / read 256 MiB

say "write and read of a 256 MiB file ($THR_RUNS interleaved runs each)"
src=$tmp/src.bin
head -c 256M /dev/urandom >"$src"
ctl write big.bin <"$src" || die "agentctl write failed"
ctl read big.bin | cmp -s - "$src" || die "agentctl read big.bin does not give back what agentctl write sent"
t_ctl_write() { ctl write big.bin <"$src"; }
t_cat_write() { cat "$src" >"$tmp/cat.bin"; }
t_pipe_write() { cat "$src" | cat >"$tmp/pipe.bin" && sync "$tmp/pipe.bin"; }
t_ssh_write() { sshc "cat > $ws/ssh.bin" <"$src"; }
t_ctl_read() { ctl read big.bin >/dev/null; }
t_cat_read() { cat "$ws/big.bin" >/dev/null; }
t_ssh_read() { sshc "cat $ws/big.bin" >/dev/null; }
set_args=(ctl_write t_ctl_write cat_write t_cat_write pipe_write t_pipe_write)
[[ -n $ssh_ok ]] && set_args+=(ssh_write t_ssh_write)
interleave "$THR_RUNS" "${set_args[@]}"
set_args=(ctl_read t_ctl_read cat_read t_cat_read)
[[ -n $ssh_ok ]] && set_args+=(ssh_read t_ssh_read)
interleave "$THR_RUNS" "${set_args[@]}"
for k in ctl_write cat_write pipe_write ssh_write ctl_read cat_read ssh_read; do
	R[${k}_mbps]=$(mbps "$k" "$MiB256" || true)
done
rm -f "$src" "$tmp/cat.bin" "$tmp/pipe.bin" "$ws/ssh.bin" "$ws/big.bin"

# ---------------------------------------------------------------- search

say "search: 20,000 files, a string in 5 of them ($((THR_RUNS + 2)) interleaved runs each)"
# Same shape as makeSearchTree in agentd/bench_test.go: 100 dirs x 200
# files of 40 lines; the needle in files 2000, 6000, 10000, 14000, 18000.
tree=$ws/tree
plain='' needle=''
for ((l = 0; l < 40; l++)); do
	printf -v line 'line %02d: the quick brown fox jumps over the lazy dog' "$l"
	plain+="$line"$'\n'
	((l == 0)) && needle+="$line $NEEDLE"$'\n' || needle+="$line"$'\n'
done
for ((d = 0; d < 100; d++)); do
	printf -v dir '%s/d%03d' "$tree" "$d"
	mkdir -p "$dir"
	for ((f = 0; f < 200; f++)); do
		printf -v file '%s/f%03d.txt' "$dir" "$f"
		if (((d * 200 + f) % 4000 == 2000)); then
			printf '%s' "$needle" >"$file"
		else
			printf '%s' "$plain" >"$file"
		fi
	done
done
n=$(ctl grep "$NEEDLE" tree | wc -l)
[[ $n == 5 ]] || die "agentctl grep $NEEDLE found $n matching lines, want 5"
n=$(grep -rn "$NEEDLE" "$tree" | wc -l)
[[ $n == 5 ]] || die "grep -rn $NEEDLE found $n matching lines, want 5"
t_ctl_grep() { ctl grep "$NEEDLE" tree >/dev/null; }
t_grep_r() { grep -rn "$NEEDLE" "$tree" >/dev/null; }
interleave $((THR_RUNS + 2)) ctl_grep t_ctl_grep grep_r t_grep_r
for k in ctl_grep grep_r; do R[${k}_ms]=$(awk -v us="${R[$k]}" 'BEGIN { printf "%.1f", us / 1000 }'); done

# ---------------------------------------------------------------- summary

met=0 missed=0
# row LABEL VALUE UNIT [BASELABEL BASEVALUE [HIGHER_IS_BETTER [OP TARGET]]]
# prints one line of the table. A row with an empty LABEL adds a baseline to
# the row above it. The speed column is how many times faster agentd is than
# the baseline (>1: agentd faster); the last column judges VALUE against the
# target when there is one.
row() {
	local label=$1 val=$2 unit=$3 blabel=${4:-} bval=${5:-} hib=${6:-1} op=${7:-} target=${8:-}
	local v="" b="" ratio="" verdict=""
	if [[ -n $label ]]; then
		v="n/a"
		[[ -z $val ]] || v="$val $unit"
	fi
	if [[ -n $blabel ]]; then
		b="$blabel: n/a"
		[[ -z $bval ]] || b="$blabel: $bval $unit"
		if [[ -n $val && -n $bval ]]; then
			ratio=$(awk -v a="$val" -v b="$bval" -v h="$hib" 'BEGIN { r = h ? a / b : b / a; printf "%.2fx", r }')
		fi
	fi
	if [[ -n $op ]]; then
		if [[ -z $val ]]; then
			verdict="n/a ($op $target $unit)"
		elif awk -v a="$val" -v t="$target" -v op="$op" 'BEGIN { exit !(op == "<=" ? a <= t : a >= t) }'; then
			verdict="MET ($op $target $unit)" met=$((met + 1))
		else
			verdict="MISSED ($op $target $unit)" missed=$((missed + 1))
		fi
	fi
	printf '%-38s %11s   %-46s %7s   %s\n' "$label" "$v" "$b" "$ratio" "$verdict"
}

summary() {
	local ctl_exec=${R[ctl_exec_p50]:-} ctl_out=${R[ctl_stdout_mbps]:-} ctl_w=${R[ctl_write_mbps]:-} ctl_r=${R[ctl_read_mbps]:-}
	local line
	line=$(printf '%.0s-' {1..128})
	printf '%-38s %11s   %-46s %7s   %s\n' "measure" "agentd" "baseline" "speed" "target"
	echo "$line"
	row "exec true p50, in-process Go client" "${R[go_exec_p50]:-}" ms "os/exec true, no agentd" "${R[go_osexec_p50]:-}" 0 "<=" 3
	row "exec true p99, in-process Go client" "${R[go_exec_p99]:-}" ms "os/exec true, no agentd" "${R[go_osexec_p99]:-}" 0
	row "exec true p50, agentctl process" "$ctl_exec" ms "ssh, multiplexed" "${R[ssh_exec_p50]:-}" 0
	row "" "$ctl_exec" ms "ssh, multiplexed, user's ~/.bashrc" "${R[ssh_rc_exec_p50]:-}" 0
	row "" "$ctl_exec" ms "agentctl version (Go process start, no RPC)" "${R[ctl_version_p50]:-}" 0
	row "" "$ctl_exec" ms "fork+exec of true alone" "${R[true_exec_p50]:-}" 0
	row "exec true p99, agentctl process" "${R[ctl_exec_p99]:-}" ms "ssh, multiplexed" "${R[ssh_exec_p99]:-}" 0
	row "stdout 256 MiB, in-process Go client" "${R[go_stdout]:-}" MB/s "" "" 1 ">=" 600
	row "stdout 1 GiB, agentctl exec" "$ctl_out" MB/s "ssh, multiplexed" "${R[ssh_stdout_mbps]:-}" 1 ">=" 600
	row "" "$ctl_out" MB/s "head | cat (plain pipe)" "${R[pipe_stdout_mbps]:-}" 1
	row "write 256 MiB, in-process Go client" "${R[go_write]:-}" MB/s "" "" 1 ">=" 500
	row "write 256 MiB, agentctl write" "$ctl_w" MB/s "cat F >G (in-kernel copy, no fsync)" "${R[cat_write_mbps]:-}" 1 ">=" 500
	row "" "$ctl_w" MB/s "cat F | cat >G; sync G" "${R[pipe_write_mbps]:-}" 1
	row "" "$ctl_w" MB/s "ssh 'cat >G' <F (no fsync)" "${R[ssh_write_mbps]:-}" 1
	row "read 256 MiB, in-process Go client" "${R[go_read]:-}" MB/s "" "" 1 ">=" 500
	row "read 256 MiB, agentctl read" "$ctl_r" MB/s "cat F >/dev/null" "${R[cat_read_mbps]:-}" 1 ">=" 500
	row "" "$ctl_r" MB/s "ssh 'cat F' >/dev/null" "${R[ssh_read_mbps]:-}" 1
	row "search 20k files, in-process Go client" "${R[go_search]:-}" ms "grep -rn" "${R[grep_r_ms]:-}" 0
	row "search 20k files, agentctl grep" "${R[ctl_grep_ms]:-}" ms "grep -rn" "${R[grep_r_ms]:-}" 0
	echo "$line"
	echo "speed: how many times faster agentd is than the baseline (above 1: faster; below 1: slower). MB = 10^6 bytes."
	echo "latency: $LAT_RUNS runs per command; throughput and search: median of interleaved runs; Go: -benchtime $BENCHTIME, 256 MiB ones $BIGTIME."
	echo "load average at start: $load_start; at the end: $(loadavg) (the machine has $(nproc) CPUs; above that, others compete)."
	echo "targets met: $met, missed: $missed"
}

# ---------------------------------------------------------------- profiles

if [[ -n $PROFILE ]]; then
	say "CPU profiles of the throughput benchmarks (client and daemon in one process)"
	go test -c -o "$outdir/agentd.test" ./agentd/ || die "go test -c ./agentd/ failed"
	for name in Stdout Write256MB Read256MB; do
		(cd "$outdir" && ./agentd.test -test.run '^$' -test.bench "^Benchmark$name\$" -test.benchtime 3x \
			-test.cpuprofile "$name.cpu" 2>&1 | grep '^Benchmark') | tee -a "$raw" >&2 || die "profiling $name failed"
		go tool pprof -top -nodecount 15 "$outdir/agentd.test" "$outdir/$name.cpu" 2>/dev/null | sed -n '/flat%/,$p' | tee -a "$raw" >&2
	done
	note "profiles: .bench/*.cpu (go tool pprof -http : .bench/agentd.test .bench/Stdout.cpu)"
fi

say "summary"
summary_out=$tmp/summary.txt
summary >"$summary_out"
tee -a "$raw" <"$summary_out"
echo "(raw results: ${raw#"$root"/})" >&2
