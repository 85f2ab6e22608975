# Shared helpers for the benchmark scripts. Source it; do not run it.

# timeit NAME RUNS WARMUP CMD: median wall seconds of CMD (a shell string)
# over RUNS runs, with hyperfine when installed, else a bash loop. Prints
# the median on stdout (the median, not the mean: these machines are shared
# and a stray slow run should not decide a figure); hyperfine's own report
# goes to stderr.
timeit() {
	local name=$1 runs=$2 warmup=$3 cmd=$4
	if command -v hyperfine >/dev/null 2>&1; then
		local csv
		csv=$(mktemp)
		hyperfine --style basic --warmup "$warmup" --runs "$runs" -n "$name" --export-csv "$csv" "$cmd" >&2
		awk -F, 'NR==2 {print $4}' "$csv"
		rm -f "$csv"
	else
		local i start end
		local -a t=()
		for ((i = 0; i < warmup; i++)); do bash -c "$cmd" >/dev/null 2>&1; done
		for ((i = 0; i < runs; i++)); do
			start=$(date +%s%N)
			bash -c "$cmd" >/dev/null 2>&1
			end=$(date +%s%N)
			t+=($((end - start)))
		done
		printf '%s\n' "${t[@]}" | sort -n | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.6f\n", m / 1e9}'
		echo "$name: $runs runs (bash loop)" >&2
	fi
}

# ratio A B: A/B to three decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f\n", a / b}'; }

# ms S: seconds to milliseconds, one decimal.
ms() { awk -v s="$1" 'BEGIN {printf "%.1f\n", s * 1000}'; }

# verdict VALUE OP TARGET: PASS or FAIL for VALUE <= or >= TARGET.
verdict() {
	awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
		ok = (op == "<=") ? (v <= t) : (v >= t)
		print ok ? "PASS" : "FAIL"
	}'
}
