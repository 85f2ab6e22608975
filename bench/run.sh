#!/usr/bin/env bash
# Runs every figure of issue 2 §6 and prints a summary; BENCHMARKS.md holds
# the figures of the last recorded run and how to read them.
#
#   bench/run.sh                 # everything (about 15-30 minutes on 2 cores)
#   SKIP_PEERS=1 SKIP_1M=1 bench/run.sh
#
# Files go to a fresh temp dir (TMPDIR, default /tmp: use a directory on
# the disk you mean to measure), never into the repository.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TALLY_BENCH_DIR=$tmp
out=$tmp/results.txt

{
	echo "machine: $(nproc) cores, $(go version), $(uname -sr)"
	echo "filesystem: $(df -h "$tmp" | awk 'NR==2 {print $1, $6}')"
	echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
} | tee "$out"

gobench() { # PKG PATTERN BENCHTIME
	go test "$1" -run '^$' -bench "$2" -benchtime "$3" -timeout 60m 2>&1 | tee -a "$out" | grep -E '^(Benchmark|FAIL|panic|---)' >&2
}

gobench ./store '^BenchmarkDurableAppend$' 4000x
gobench ./ledger '^BenchmarkSubmitVsRawFsync$' 2000x
gobench ./ledger '^BenchmarkGroupCommit$' 8000x
gobench ./ledger '^BenchmarkFoldVsJSON$' 3x
gobench ./ledger '^BenchmarkMemoryPerPromise$' 1x
[[ -n ${SKIP_START:-} ]] || go run ./bench/start 2>&1 | tee -a "$out" | grep -E '^(start|append|open|read|now / before):' >&2
[[ -n ${SKIP_PEERS:-} ]] || bash bench/peers.sh 2>&1 | tee -a "$out" | grep -E '^figure' >&2
[[ -n ${SKIP_1M:-} ]] || bash bench/ledger1m.sh 2>&1 | tee -a "$out" | grep -E '^figure' >&2

# metric BENCH UNIT: the value printed before UNIT on BENCH's line.
metric() {
	awk -v b="$1" -v u="$2" '$1 ~ "^"b"(-[0-9]+)?$" {for (i = 2; i <= NF; i++) if ($i == u) print $(i - 1)}' "$out" | tail -1
}
line() { # NAME VALUE OP TARGET DETAIL
	if [[ -z $2 ]]; then
		printf '%-44s %10s %s %-6s %s\n' "$1" "-" "$3" "$4" "NOT RUN"
	else
		printf '%-44s %10s %s %-6s %s  %s\n' "$1" "$2" "$3" "$4" "$(verdict "$2" "$3" "$4")" "$5"
	fi
}
fig() { grep -E "^$1 " "$out" | tail -1 | sed -E 's/.*ratio=([0-9.]+).*/\1/'; }

echo
echo "== summary (ratios; each against a baseline from this run)"
line "1a store append / raw write+fdatasync" "$(metric BenchmarkDurableAppend x_raw)" '>=' 0.8 \
	"$(metric BenchmarkDurableAppend store_appends/s) vs $(metric BenchmarkDurableAppend raw_fsyncs/s) /s"
line "1b ledger.Submit / raw write+fdatasync" "$(metric BenchmarkSubmitVsRawFsync x_raw)" '>=' 0.8 \
	"$(metric BenchmarkSubmitVsRawFsync submits/s) vs $(metric BenchmarkSubmitVsRawFsync raw_fsyncs/s) /s"
line "2  64 concurrent Submit / single writer" "$(metric BenchmarkGroupCommit x_single)" '>=' 20 \
	"$(metric BenchmarkGroupCommit 64way_submits/s) vs $(metric BenchmarkGroupCommit single_submits/s) /s, $(metric BenchmarkGroupCommit 64way_cpu_us/rec) µs CPU a record"
line "3a tally promise / bd create" "$(fig figure3a)" '<=' 0.1 "$(grep -E '^figure3a' "$out" | cut -d' ' -f2-3)"
line "3b tally ls --json / bd list --json" "$(fig figure3b)" '<=' 0.2 "$(grep -E '^figure3b' "$out" | cut -d' ' -f2-3)"
line "4a fold rate / encoding/json (in memory)" "$(metric BenchmarkFoldVsJSON fold_x_json)" '>=' 2 \
	"$(metric BenchmarkFoldVsJSON fold_ns/line) vs $(metric BenchmarkFoldVsJSON json_ns/line) ns/line"
line "4b fold rate / encoding/json (Scan+chain)" "$(metric BenchmarkFoldVsJSON scanfold_x_json)" '>=' 2 \
	"$(metric BenchmarkFoldVsJSON scanfold_ns/line) vs $(metric BenchmarkFoldVsJSON json_ns/line) ns/line"
line "5  ls --overdue 1M: checkpoint / none" "$(fig figure5)" '<=' 0.2 "$(grep -E '^figure5' "$out" | cut -d' ' -f2-3)"
line "6a bytes per open promise (folded)" "$(metric BenchmarkMemoryPerPromise B/promise_folded)" '<=' 512 "1,000,000 promises"
line "6b bytes per open promise (checkpoint)" "$(metric BenchmarkMemoryPerPromise B/promise_checkpoint)" '<=' 512 "1,000,000 promises"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
if [[ -n ${RESULTS:-} ]]; then cp "$out" "$RESULTS"; fi
