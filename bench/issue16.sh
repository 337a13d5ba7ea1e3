#!/usr/bin/env bash
# Issue 16's whole table against kafkarepl, summarized against Apache Kafka 4.0's figures
# in ../shared/reference/kafka-baseline.md (bench/issue16_summary.py reads them there):
#
#   data plane, a fresh 3-broker cluster (kafkarepl cluster up, Kafka's defaults), RUNS x:
#     produce 1M x 100 B RF=1 acks=1; RF=3 acks=all min ISR 2; consume the RF=1 topic;
#     end-to-end latency at 5,000 msg/s RF=3 acks=all;
#     kill -9 of partition 0's leader at 2,000 msg/s (ack gap, lost, duplicates), each on
#     a fresh cluster
#   control plane, bench/control_plane.py, fresh LocalClusters, RUNS x:
#     create 3,000 and 10,000 partitions RF 3 until all led with full ISR; full Metadata;
#     idle CPU/RSS; with 10,000: broker restart, controller kill -9
#
#   RUNS=3 bench/issue16.sh                  # ~15 min on a 2-core machine
#   OUT=/tmp/i16.jsonl DATA_ROOT=/srv/x bench/issue16.sh   (DATA_ROOT: where clusters live)
#   SKIP_DATA=1 / SKIP_CONTROL=1 leave out a half; python bench/issue16_summary.py $OUT again
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-$HERE/../.venv/bin/python}"
[ -x "$PY" ] || PY=python
export PATH="$(dirname "$PY"):$PATH"  # kafkarepl, python: this checkout's
RUNS="${RUNS:-3}"
BASE_PORT="${BASE_PORT:-27092}"
DATA_ROOT="${DATA_ROOT:-/tmp}"
OUT="${OUT:-/tmp/issue16-$(date -u +%Y%m%dT%H%M%S).jsonl}"
B="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
E2E=("$PY" "$HERE/e2e.py")
DATA=""

down() {
    if [ -n "$DATA" ]; then
        kafkarepl cluster down --data-dir "$DATA" >/dev/null 2>&1 || true
        rm -rf "$DATA"
        DATA=""
    fi
}
trap down EXIT INT TERM
log() { echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }
record() { tee -a "$OUT"; }
up() {
    DATA="$(mktemp -d "$DATA_ROOT/kafkarepl-i16.XXXXXX")"
    kafkarepl cluster up --brokers 3 --base-port "$BASE_PORT" --data-dir "$DATA" >/dev/null
}
topic() {  # topic NAME PARTITIONS RF [k=v]...
    local name=$1 parts=$2 rf=$3; shift 3
    local cfg=()
    for kv in "$@"; do cfg+=(--config "$kv"); done
    kafkarepl topics --bootstrap-server "127.0.0.1:$BASE_PORT" --create --topic "$name" \
        --partitions "$parts" --replication-factor "$rf" "${cfg[@]}" >/dev/null
}

log "results to $OUT"
if [ -z "${SKIP_DATA:-}" ]; then
    up
    for i in $(seq 1 "$RUNS"); do
        log "run $i/$RUNS: produce RF=1 acks=1, RF=3 acks=all, consume, latency"
        topic "r1-$i" 6 1
        topic "r3-$i" 6 3 min.insync.replicas=2
        "${E2E[@]}" produce --bootstrap "$B" --topic "r1-$i" --records 1000000 --acks 1 \
            --data-dir "$DATA" | record
        "${E2E[@]}" produce --bootstrap "$B" --topic "r3-$i" --records 1000000 --acks all \
            --data-dir "$DATA" | record
        "${E2E[@]}" consume --bootstrap "$B" --topic "r1-$i" --data-dir "$DATA" | record
        topic "lat-$i" 6 3 min.insync.replicas=2
        "${E2E[@]}" latency --bootstrap "$B" --topic "lat-$i" --rate 5000 --seconds 20 --warmup 2 \
            | record
    done
    down
    for i in $(seq 1 "$RUNS"); do
        log "run $i/$RUNS: kill -9 of partition 0's leader at 2,000 msg/s (fresh cluster)"
        up
        topic "fo-$i" 6 3 min.insync.replicas=2
        "${E2E[@]}" failover --data-dir "$DATA" --topic "fo-$i" --rate 2000 --after 3 2>/dev/null \
            | record
        down
    done
fi
if [ -z "${SKIP_CONTROL:-}" ]; then
    log "control plane: 3,000 and 10,000 partitions, $RUNS runs"
    "$PY" "$HERE/control_plane.py" --partitions 3000 10000 --runs "$RUNS" \
        --data-root "$DATA_ROOT" --out "$OUT" >/dev/null
fi
log "done: $OUT"
"$PY" "$HERE/issue16_summary.py" "$OUT"
