#!/usr/bin/env bash
# bench/control_plane.py against two checkouts, interleaved run by run (the same file
# system load for both), e.g. main before a change and this branch:
#
#   BASE=/work/wt-base RUNS=3 bench/compare_control_plane.sh   # OUT=/tmp/cp-cmp-<time>.jsonl
#
# BASE must be a built checkout (tools/setup.sh). Each JSON line gets "rev": base|head.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
HEAD_ROOT="$(cd "$HERE/.." && pwd)"
BASE="${BASE:?BASE=<another checkout>}"
RUNS="${RUNS:-3}"
OUT="${OUT:-/tmp/cp-cmp-$(date -u +%Y%m%dT%H%M%S).jsonl}"
ARGS=(${CP_ARGS:---partitions 3000 10000})
cp "$HERE/control_plane.py" "$BASE/bench/_control_plane_cmp.py"  # same bench, their kafkarepl
trap 'rm -f "$BASE/bench/_control_plane_cmp.py"' EXIT
tag() { python3 -c "import json,sys
for line in sys.stdin:
    r = json.loads(line); r['rev'] = sys.argv[1]; print(json.dumps(r), flush=True)" "$1"; }
for i in $(seq 1 "$RUNS"); do
    order="base head"; [ $((i % 2)) -eq 0 ] && order="head base"
    for rev in $order; do
        if [ "$rev" = base ]; then root=$BASE; script=$BASE/bench/_control_plane_cmp.py
        else root=$HEAD_ROOT; script=$HERE/control_plane.py; fi
        echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] run $i: $rev" >&2
        # From its own root: a broker runs `python -m`, which puts the working directory
        # first on sys.path, so another checkout's kafkarepl there would shadow this one.
        (cd "$root" && "$root/.venv/bin/python" "$script" "${ARGS[@]}") | tag "$rev" | tee -a "$OUT"
    done
done
echo "results in $OUT" >&2
