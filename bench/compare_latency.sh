#!/usr/bin/env bash
# End-to-end latency at 5,000 msg/s (RF=3 acks=all min ISR 2, 6 partitions) on a fresh
# 3-broker cluster of each of two checkouts, interleaved run by run (alternating which
# goes first), e.g. main before a change and this branch:
#
#   BASE=/work/wt-base RUNS=3 bench/compare_latency.sh   # OUT=/tmp/lat-cmp-<time>.jsonl
#
# Each JSON line gets "rev": base|head; python bench/issue16_summary.py --latency OUT.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
HEAD_ROOT="$(cd "$HERE/.." && pwd)"
BASE="${BASE:?BASE=<another checkout>}"
RUNS="${RUNS:-3}"
PORT="${BASE_PORT:-28092}"
OUT="${OUT:-/tmp/lat-cmp-$(date -u +%Y%m%dT%H%M%S).jsonl}"
DATA=""
down() { [ -n "$DATA" ] && { (cd "$ROOT" && "$ROOT/.venv/bin/python" -m kafkarepl cluster down --data-dir "$DATA" >/dev/null 2>&1) || true; rm -rf "$DATA"; DATA=""; }; }
trap down EXIT INT TERM
for i in $(seq 1 "$RUNS"); do
    order="base head"; [ $((i % 2)) -eq 0 ] && order="head base"
    for rev in $order; do
        if [ "$rev" = base ]; then ROOT=$BASE; else ROOT=$HEAD_ROOT; fi
        PY="$ROOT/.venv/bin/python"
        echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] run $i: $rev" >&2
        DATA="$(mktemp -d /tmp/kafkarepl-lat.XXXXXX)"
        (cd "$ROOT" && PATH="$ROOT/.venv/bin:$PATH" "$PY" -m kafkarepl cluster up --brokers 3 \
            --base-port "$PORT" --data-dir "$DATA" >/dev/null
         PATH="$ROOT/.venv/bin:$PATH" "$PY" -m kafkarepl topics --bootstrap-server "127.0.0.1:$PORT" \
            --create --topic lat --partitions 6 --replication-factor 3 \
            --config min.insync.replicas=2 >/dev/null)
        B="127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))"
        "$HEAD_ROOT/.venv/bin/python" "$HERE/e2e.py" latency --bootstrap "$B" --topic lat --rate 5000 \
            --seconds 20 --warmup 2 \
            | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['rev']='$rev'; print(json.dumps(r))" \
            | tee -a "$OUT"
        down
    done
done
echo "results in $OUT" >&2
