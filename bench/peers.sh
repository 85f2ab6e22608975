#!/usr/bin/env bash
# Figure 3 of issue 2 §6: tally against beads (bd v0.47.1), on one machine
# in one run.
#   - wall time per `tally promise` against per `bd create`      (target ≤ 1/10)
#   - `tally ls --json` on 10,000 promises against
#     `bd list --json --limit 0` on 10,000 issues                 (target ≤ 1/5)
# bd is fetched and built into a temp dir (never into this repository) and
# run with --no-daemon; its 10,000 issues are loaded with `bd import`, and
# tally's 10,000 promises with `tally import` of a generated pinki file.
#
#   bench/peers.sh            # env: N (10000), RUNS (20), BD_VERSION (v0.47.1), KEEP=1 keeps the temp dir
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

N=${N:-10000}
RUNS=${RUNS:-20}
BD_VERSION=${BD_VERSION:-v0.47.1}
NOW=2026-10-01T00:00:00Z
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-peers.XXXXXX")
[[ ${KEEP:-} == 1 ]] || trap 'rm -rf "$tmp"' EXIT

echo "== building tally and bd $BD_VERSION into $tmp" >&2
go build -o "$tmp/tally" ./cmd/tally
go build -o "$tmp/gen" ./bench/gen
bd_ok=1
(
	mkdir "$tmp/bdmod" && cd "$tmp/bdmod" && go mod init scratch >/dev/null 2>&1 &&
		go get "github.com/steveyegge/beads/cmd/bd@$BD_VERSION" &&
		go build -o "$tmp/bd" github.com/steveyegge/beads/cmd/bd
) >"$tmp/bd-build.log" 2>&1 || bd_ok=0
if [[ $bd_ok == 0 ]]; then
	echo "bd failed to build; the error was:" >&2
	tail -20 "$tmp/bd-build.log" >&2
	echo "figure3 bd_build=FAILED"
	exit 1
fi
"$tmp/bd" --version >&2

echo "== loading $N records into each" >&2
"$tmp/gen" pinki -n "$N" -declarations-only -now "$NOW" -overdue 0 >"$tmp/promises.jsonl"
"$tmp/gen" beads -n "$N" -prefix bench >"$tmp/issues.jsonl"

T="$tmp/tally --dir $tmp/tally-ledger"
$T init >/dev/null
$T import "$tmp/promises.jsonl" >&2

mkdir "$tmp/bdrepo"
(
	cd "$tmp/bdrepo"
	git init -q
	git config user.name bench
	git config user.email bench@localhost
	"$tmp/bd" --no-daemon init --quiet --prefix bench
	"$tmp/bd" --no-daemon import -i "$tmp/issues.jsonl"
) >"$tmp/bd-load.log" 2>&1 || {
	echo "bd failed to load its issues; the log was:" >&2
	tail -20 "$tmp/bd-load.log" >&2
	echo "figure3 bd_load=FAILED"
	exit 1
}
BD="cd $tmp/bdrepo && $tmp/bd --no-daemon"

tn=$($T ls --json --now $NOW | grep -o '"id":' | wc -l)
bn=$(bash -c "$BD list --json --limit 0" 2>/dev/null | grep -o '"id":' | wc -l)
echo "tally ls --json lists $tn promises; bd list --json --limit 0 lists $bn issues" >&2

echo "== list" >&2
t_ls=$(timeit "tally ls --json" "$RUNS" 3 "$T ls --json --now $NOW >/dev/null")
b_ls=$(timeit "bd list --json --limit 0" "$RUNS" 3 "$BD list --json --limit 0 >/dev/null 2>&1")

echo "== create" >&2
t_mk=$(timeit "tally promise" "$RUNS" 2 "TALLY_ACTOR=team-01/agent-001 $T promise 'hand back a reviewed schema' --to team-02/author-002 --until 3d >/dev/null")
b_mk=$(timeit "bd create" "$RUNS" 2 "$BD create 'hand back a reviewed schema' -p 2 -t task >/dev/null 2>&1")

r_mk=$(ratio "$t_mk" "$b_mk")
r_ls=$(ratio "$t_ls" "$b_ls")
echo "figure3a tally_promise_ms=$(ms "$t_mk") bd_create_ms=$(ms "$b_mk") ratio=$r_mk target<=0.100 $(verdict "$r_mk" '<=' 0.1)"
echo "figure3b tally_ls_json_ms=$(ms "$t_ls") bd_list_json_ms=$(ms "$b_ls") ratio=$r_ls target<=0.200 $(verdict "$r_ls" '<=' 0.2) (tally $tn promises, bd $bn issues)"
