#!/usr/bin/env bash
# End-to-end benchmarks of issues 3-5 against a fresh 3-broker kafkarepl cluster.
# Workloads: ../shared/reference/kafka-baseline.md. Output: one JSON line per result in
# $OUT (default /tmp/e2e-<time>.jsonl); summarize with `python bench/e2e_summary.py $OUT`.
#
#   RUNS=3 BASE_PORT=25092 bench/run_e2e.sh
#   SKIP_GIB=1 to leave out the 1 GiB consume vs bare-sendfile comparison.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
RUNS="${RUNS:-3}"
BASE_PORT="${BASE_PORT:-25092}"
RECORDS="${RECORDS:-1000000}"
DATA="$(mktemp -d /tmp/kafkarepl-e2e.XXXXXX)"
OUT="${OUT:-/tmp/e2e-$(date -u +%Y%m%dT%H%M%S).jsonl}"
B="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
E2E=(python "$HERE/e2e.py")

teardown() {
    kafkarepl cluster down --data-dir "$DATA" >/dev/null 2>&1 || true
    rm -rf "$DATA"
}
trap teardown EXIT INT TERM

log() { echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }
record() { tee -a "$OUT"; }  # JSON lines to stdout and $OUT
topic() {  # topic NAME PARTITIONS RF [k=v]...
    local name=$1 parts=$2 rf=$3; shift 3
    local cfg=()
    for kv in "$@"; do cfg+=(--config "$kv"); done
    kafkarepl topics --bootstrap-server "127.0.0.1:$BASE_PORT" --create --topic "$name" \
        --partitions "$parts" --replication-factor "$rf" "${cfg[@]}" >/dev/null
}

log "cluster up in $DATA, results to $OUT"
t0=$(date +%s.%N)
kafkarepl cluster up --brokers 3 --base-port "$BASE_PORT" --data-dir "$DATA" >/dev/null
t1=$(date +%s.%N)
python -c "import json,sys; print(json.dumps({'bench': 'cluster-up', 'brokers': 3, \
'seconds': round($t1 - $t0, 3), 'load1': float(open('/proc/loadavg').read().split()[0])}))" \
    | record
"${E2E[@]}" idle --data-dir "$DATA" --restart 0 | record  # RSS of fresh, empty brokers

# once on the fresh cluster (few partitions, nothing idle), then again after the
# produce runs below: the figure differs when idle partitions pile up (see RESULTS.md)
log "latency at 5,000 msg/s RF=3 acks=all on the fresh cluster"
topic lat-fresh 6 3 min.insync.replicas=2
"${E2E[@]}" latency --bootstrap "$B" --topic lat-fresh --rate 5000 --seconds 20 --warmup 2 \
    | record

for i in $(seq 1 "$RUNS"); do
    log "run $i: produce RF=1 acks=1, RF=3 acks=all, consume"
    topic "r1-$i" 6 1
    topic "r3-$i" 6 3 min.insync.replicas=2
    "${E2E[@]}" produce --bootstrap "$B" --topic "r1-$i" --records "$RECORDS" --acks 1 \
        --data-dir "$DATA" | record
    "${E2E[@]}" produce --bootstrap "$B" --topic "r3-$i" --records "$RECORDS" --acks all \
        --data-dir "$DATA" | record
    "${E2E[@]}" consume --bootstrap "$B" --topic "r1-$i" --data-dir "$DATA" | record
    "${E2E[@]}" consume-kcat --bootstrap "$B" --topic "r1-$i" --data-dir "$DATA" | record
done

topic lat 6 3 min.insync.replicas=2
for i in $(seq 1 "$RUNS"); do
    log "run $i: latency at 5,000 msg/s RF=3 acks=all"
    "${E2E[@]}" latency --bootstrap "$B" --topic lat --rate 5000 --seconds 20 --warmup 2 | record
done

for i in $(seq 1 "$RUNS"); do
    log "run $i: failover, kill -9 and clean stop of partition 0's leader at 2,000 msg/s"
    topic "fo-kill-$i" 6 3 min.insync.replicas=2
    "${E2E[@]}" failover --data-dir "$DATA" --topic "fo-kill-$i" --rate 2000 2>/dev/null | record
    topic "fo-clean-$i" 6 3 min.insync.replicas=2
    "${E2E[@]}" failover --data-dir "$DATA" --topic "fo-clean-$i" --rate 2000 --clean \
        --after 0 2>/dev/null | record
done

log "idle RSS after the workloads, per-broker stop + start-broker time"
"${E2E[@]}" idle --data-dir "$DATA" --restart 3 | record

log "controller failover with 1,000 partitions RF=2"
topic p1000 1000 2
"${E2E[@]}" controller-failover --data-dir "$DATA" --topic p1000 2>/dev/null | record

if [[ -z "${SKIP_GIB:-}" ]]; then
    log "1 GiB topic: one consumer vs a bare sendfile loop of the same segment bytes"
    topic gib 6 1
    "${E2E[@]}" produce --bootstrap "$B" --topic gib --records 107374 --size 10000 --acks 1 \
        | record
    for i in $(seq 1 "$RUNS"); do  # interleaved, so each ratio pairs figures taken together
        "${E2E[@]}" consume --bootstrap "$B" --topic gib --data-dir "$DATA" | record
        "${E2E[@]}" consume-kcat --bootstrap "$B" --topic gib --data-dir "$DATA" | record
        "${E2E[@]}" sendfile-compare --data-dir "$DATA" --topic gib --rounds 1 | record
    done
fi
log "done: $OUT"
