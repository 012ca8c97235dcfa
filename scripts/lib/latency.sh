# Shared by scripts/bench.sh and scripts/bench-hub.sh (sourced, not run):
# measure_latency times each of the commands in lat_cmds (named lat_names,
# keyed lat_keys) LAT_RUNS times and sets R[KEY_p50] and R[KEY_p99] in
# milliseconds. With hyperfine (-N, no shell): three rounds, so that a
# burst of load from elsewhere hits all commands alike; without it, a shell
# loop, round-robin, after WARMUP untimed rounds. It needs from the caller:
# $tmp, $raw, LAT_RUNS, note, die, now_us and the associative array R.
measure_latency() {
	local warmup=${1:-10}
	local samples=$tmp/latency # one line per run: key seconds
	: >"$samples"
	if command -v hyperfine >/dev/null; then
		local -a hargs=()
		local i round
		for i in "${!lat_names[@]}"; do hargs+=(-n "${lat_names[$i]}" "${lat_cmds[$i]}"); done
		for round in 1 2 3; do
			note "round $round of 3"
			hyperfine -N --style basic --warmup 10 --runs $(((LAT_RUNS + 2) / 3)) --export-json "$tmp/latency.json" "${hargs[@]}" 2>&1 | tee -a "$raw" >&2
			# hyperfine's JSON lists each command's run times in order.
			awk -v keys="${lat_keys[*]}" 'BEGIN { split(keys, k, " ") }
				/"times": \[/ { n++; inside = 1; next }
				inside && /\]/ { inside = 0; next }
				inside { gsub(/[ ,]/, ""); print k[n], $0 }' "$tmp/latency.json" >>"$samples"
		done
	else
		local r i t0 t1
		for ((r = 0; r < LAT_RUNS + warmup; r++)); do
			for i in "${!lat_keys[@]}"; do
				t0=$(now_us)
				${lat_cmds[$i]} >/dev/null || die "${lat_names[$i]} failed"
				t1=$(now_us)
				((r < warmup)) || echo "${lat_keys[$i]} $(awk -v us=$((t1 - t0)) 'BEGIN { print us / 1e6 }')" >>"$samples"
			done
		done
	fi
	local k p50 p99
	for k in "${lat_keys[@]}"; do
		p50='' p99=''
		read -r p50 p99 < <(awk -v k="$k" '$1 == k { print $2 * 1000 }' "$samples" | sort -g |
			awk '{ a[NR] = $1 } END { if (NR) printf "%.2f %.2f\n", a[int(0.50 * (NR - 1)) + 1], a[int(0.99 * (NR - 1)) + 1] }') || true
		R[${k}_p50]=$p50 R[${k}_p99]=$p99
		note "  $k: p50 $p50 ms, p99 $p99 ms"
	done
}
