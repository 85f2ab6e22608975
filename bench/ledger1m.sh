#!/usr/bin/env bash
# Figure 5 of issue 2 §6: `tally ls --overdue` (open + fold or checkpoint
# load + query) on a 1,000,000-event ledger with its checkpoint, against the
# same with the checkpoint deleted (target ≤ 1/5). The ledger is a generated
# pinki file (~700k promises, amends, resolves, assessments; 50 overdue at
# --now) loaded with `tally import`. Runs alternate between the two cases;
# a run without a checkpoint writes a new one, so it is deleted before each.
#
#   bench/ledger1m.sh          # env: EVENTS (1000000), RUNS (5), KEEP=1 keeps the temp dir
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

EVENTS=${EVENTS:-1000000}
RUNS=${RUNS:-5}
NOW=2026-10-01T00:00:00Z
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-1m.XXXXXX")
[[ ${KEEP:-} == 1 ]] || trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/tally" ./cmd/tally
go build -o "$tmp/gen" ./bench/gen
"$tmp/gen" pinki -n "$EVENTS" -now "$NOW" -overdue 50 >"$tmp/ledger.jsonl"
T="$tmp/tally --dir $tmp/ledger"
$T init >/dev/null
start=$(date +%s%N)
$T import "$tmp/ledger.jsonl" >&2
end=$(date +%s%N)
echo "import of $EVENTS events: $(((end - start) / 1000000)) ms" >&2
session="$tmp/ledger/sessions/default/default"
[[ -f $session/checkpoint ]] || $T ls --overdue --now $NOW >/dev/null # the first open writes one
ls -l "$session" >&2

overdue=$($T ls --overdue --json --now $NOW | grep -o '"id":' | wc -l)
echo "overdue at $NOW: $overdue" >&2

run() { # prints wall nanoseconds of one `ls --overdue`
	local s e
	s=$(date +%s%N)
	$T ls --overdue --now $NOW >/dev/null
	e=$(date +%s%N)
	echo $((e - s))
}
with=() without=()
for ((i = 0; i < RUNS; i++)); do
	[[ -f $session/checkpoint ]] || { echo "no checkpoint to time with" >&2; exit 1; }
	with+=("$(run)")
	rm -f "$session/checkpoint"
	without+=("$(run)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.6f\n", m / 1e9}'; }
echo "with checkpoint (ns):    ${with[*]}" >&2
echo "without checkpoint (ns): ${without[*]}" >&2
w=$(median "${with[@]}")
wo=$(median "${without[@]}")
r=$(ratio "$w" "$wo")
echo "figure5 with_checkpoint_ms=$(ms "$w") without_checkpoint_ms=$(ms "$wo") ratio=$r target<=0.200 $(verdict "$r" '<=' 0.2) (events=$EVENTS overdue=$overdue runs=$RUNS, medians)"
