#!/usr/bin/env bash
# compare.sh BASE: the figures a refactoring must not regress (1a, 1b, 4, 6
# and the server's durable HTTP writes), measured interleaved: the test
# binaries of BASE (a commit) and of the working tree are built once, then
# each benchmark runs ROUNDS times alternating between the two, so a minute
# of slow fsyncs falls on both. Prints each run's figure and, per
# benchmark, the median of HEAD over the median of BASE.
#
#   bench/compare.sh a32e8d0            # ROUNDS=3 by default
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench/compare.sh BASE-COMMIT}
rounds=${ROUNDS:-3}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/base" "$base" >/dev/null 2>&1
for side in base head; do
	src=.
	[ "$side" = base ] && src="$work/base"
	for pkg in store ledger server; do
		(cd "$src" && go test -c -o "$work/$side.$pkg.test" "./$pkg") >/dev/null
	done
done

# name package benchmark benchtime metric: the metric's value in one run.
benches=(
	"1a store ^BenchmarkDurableAppend$ 4000x"
	"1b ledger ^BenchmarkSubmitVsRawFsync$ 2000x"
	"4 ledger ^BenchmarkFoldVsJSON$ 3x"
	"6 ledger ^BenchmarkMemoryPerPromise$ 1x"
	"http server ^BenchmarkHTTPDurableWrites$ 6000x"
)
results=$work/results
: >"$results"
for ((r = 1; r <= rounds; r++)); do
	for b in "${benches[@]}"; do
		read -r name pkg bench benchtime <<<"$b"
		for side in base head; do
			dir=$([ "$side" = base ] && echo "$work/base" || pwd)
			out=$(cd "$dir/$pkg" && "$work/$side.$pkg.test" -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" 2>&1 | grep -E '^Benchmark' || true)
			# Every "value unit" pair of the benchmark's line(s).
			echo "$out" | awk -v n="$name" -v s="$side" -v r="$r" '{for (i = 3; i < NF; i += 2) print n, s, r, $(i+1), $i}' >>"$results"
			echo "round $r $name $side: $(echo "$out" | tr -s ' ' | cut -c1-200)"
		done
	done
done
echo
echo "figure metric base-median head-median head/base"
awk '{k = $1 " " $4; v[k, $2, ++n[k, $2]] = $5; keys[k] = 1}
function median(k, s,   m, i, j, t, a) {
	m = n[k, s]; for (i = 1; i <= m; i++) a[i] = v[k, s, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {for (k in keys) { b = median(k, "base"); h = median(k, "head"); printf "%s %g %g %.3f\n", k, b, h, (b ? h / b : 0) }}' "$results" | sort
