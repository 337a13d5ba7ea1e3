#!/usr/bin/env bash
# kill -9 of partition 0's leader at 2,000 msg/s (acks=all, RF=3, min ISR 2): the longest
# gap between acks, with fast failover on (kafkarepl.fast.failover.enable=true, default)
# and off (wait for the ZooKeeper session, as Kafka's ZooKeeper mode), interleaved in one
# run, each round on fresh 3-broker clusters. One JSON line per run in $OUT.
#
#   RUNS=5 bench/run_failover.sh ; python bench/e2e_summary.py $OUT
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RUNS="${RUNS:-5}"
BASE_PORT="${BASE_PORT:-26092}"
OUT="${OUT:-/tmp/failover-$(date -u +%Y%m%dT%H%M%S).jsonl}"
E2E=(python "$HERE/e2e.py")
DATA=""
teardown() { [ -n "$DATA" ] && { kafkarepl cluster down --data-dir "$DATA" >/dev/null 2>&1 || true; rm -rf "$DATA"; }; }
trap teardown EXIT INT TERM
log() { echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }

one() {  # one FAST(true|false) ROUND
    DATA="$(mktemp -d /tmp/kafkarepl-fo.XXXXXX)"
    kafkarepl cluster up --brokers 3 --base-port "$BASE_PORT" --data-dir "$DATA" \
        --override "kafkarepl.fast.failover.enable=$1" >/dev/null
    kafkarepl topics --bootstrap-server "127.0.0.1:$BASE_PORT" --create --topic "fo-$2" \
        --partitions 6 --replication-factor 3 --config min.insync.replicas=2 >/dev/null
    "${E2E[@]}" failover --data-dir "$DATA" --topic "fo-$2" --rate 2000 --after 3 2>/dev/null \
        | python -c "import json,sys; r=json.loads(sys.stdin.read()); r['fast_failover']=$([ "$1" = true ] && echo True || echo False); print(json.dumps(r))" \
        | tee -a "$OUT"
    teardown
    DATA=""
}

for i in $(seq 1 "$RUNS"); do
    if [ $((i % 2)) -eq 1 ]; then order="true false"; else order="false true"; fi
    for fast in $order; do
        log "round $i: fast failover $fast"
        one "$fast" "$i-$fast"
    done
done
log "results in $OUT"
