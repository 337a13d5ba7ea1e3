#!/usr/bin/env bash
# Broker throughput and latency of two revisions, measured in ONE run, interleaved, so the
# ratios pair figures taken minutes apart on the same machine (these VMs are noisy).
#
#   bench/compare_revisions.sh OLD_REV [NEW_REV (default HEAD)]
#   RUNS=2 RECORDS=500000 BASE_PORT=26092 OUT=/tmp/cmp.jsonl bench/compare_revisions.sh 0e51837
#
# Each revision is installed (C core built, as `pip install` does) into its own directory
# and run from there; the client side (bench/e2e.py, confluent-kafka) is this checkout's
# for both, so only the brokers differ. Per round: a fresh 3-broker cluster, produce
# RECORDS x 100 B RF=1 acks=1 and RF=3 acks=all (min ISR 2), consume the RF=1 topic,
# latency at 5,000 msg/s RF=3 acks=all; rounds alternate the order (old,new / new,old).
# Summary: python bench/compare_summary.py $OUT
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PY="${PYTHON:-$REPO/.venv/bin/python}"
OLD="$(git -C "$REPO" rev-parse --short "${1:?usage: compare_revisions.sh OLD_REV [NEW_REV]}")"
NEW="$(git -C "$REPO" rev-parse --short "${2:-HEAD}")"
RUNS="${RUNS:-2}"
RECORDS="${RECORDS:-500000}"
BASE_PORT="${BASE_PORT:-26092}"
OUT="${OUT:-/tmp/compare-$OLD-$NEW-$(date -u +%Y%m%dT%H%M%S).jsonl}"
WORK="$(mktemp -d /tmp/kafkarepl-compare.XXXXXX)"
B="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"

cleanup() {
    for rev in "$OLD" "$NEW"; do
        [[ -d "$WORK/data-$rev" ]] && (cd "$WORK" && PYTHONPATH="$WORK/pkg-$rev" "$PY" -m kafkarepl.cli.main \
            cluster down --data-dir "$WORK/data-$rev" >/dev/null 2>&1 || true)
        git -C "$REPO" worktree remove --force "$WORK/src-$rev" >/dev/null 2>&1 || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
log() { echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }

for rev in "$OLD" "$NEW"; do
    log "installing $rev"
    git -C "$REPO" worktree add --detach "$WORK/src-$rev" "$rev" >/dev/null 2>&1
    "$PY" -m pip install -q --no-deps --target "$WORK/pkg-$rev" "$WORK/src-$rev" >/dev/null 2>&1
    mkdir -p "$WORK/bin-$rev"  # `kafkarepl` on PATH for bench/e2e_cluster.py
    printf '#!/bin/sh\nexec "%s" -m kafkarepl.cli.main "$@"\n' "$PY" > "$WORK/bin-$rev/kafkarepl"
    chmod +x "$WORK/bin-$rev/kafkarepl"
done

one_round() {  # one_round REV ROUND
    local rev=$1 round=$2 data="$WORK/data-$1"
    local env=(env PYTHONPATH="$WORK/pkg-$rev" PATH="$WORK/bin-$rev:$PATH")
    cd "$WORK"  # never /work/main: python -m would import that checkout's kafkarepl
    "${env[@]}" "$PY" -m kafkarepl.cli.main cluster up --brokers 3 --base-port "$BASE_PORT" \
        --data-dir "$data" >/dev/null
    local pid; pid=$("$PY" -c "import json; print(json.load(open('$data/cluster.json'))['brokers']['1']['pid'])")
    grep -qz "PYTHONPATH=$WORK/pkg-$rev" "/proc/$pid/environ" || { echo "brokers not on $rev" >&2; exit 1; }
    topic() {
        "${env[@]}" "$PY" -m kafkarepl.cli.main topics --bootstrap-server "127.0.0.1:$BASE_PORT" --create \
            --topic "$1" --partitions 6 --replication-factor "$2" "${@:3}" >/dev/null
    }
    topic r1 1
    topic r3 3 --config min.insync.replicas=2
    topic lat 3 --config min.insync.replicas=2
    tag() { "$PY" -c "import json,sys
for l in sys.stdin:
    if l.startswith('{'):
        r=json.loads(l); r['rev']='$rev'; r['round']=$round; print(json.dumps(r))"; }
    "${env[@]}" "$PY" "$HERE/e2e.py" produce --bootstrap "$B" --topic r1 --records "$RECORDS" --acks 1 \
        --data-dir "$data" | tag | tee -a "$OUT"
    "${env[@]}" "$PY" "$HERE/e2e.py" produce --bootstrap "$B" --topic r3 --records "$RECORDS" --acks all \
        --data-dir "$data" | tag | tee -a "$OUT"
    "${env[@]}" "$PY" "$HERE/e2e.py" consume --bootstrap "$B" --topic r1 --data-dir "$data" | tag | tee -a "$OUT"
    "${env[@]}" "$PY" "$HERE/e2e.py" latency --bootstrap "$B" --topic lat --rate 5000 --seconds 12 --warmup 2 \
        | tag | tee -a "$OUT"
    "${env[@]}" "$PY" -m kafkarepl.cli.main cluster down --data-dir "$data" >/dev/null
    rm -rf "$data"
}

for round in $(seq 1 "$RUNS"); do
    if (( round % 2 )); then order=("$OLD" "$NEW"); else order=("$NEW" "$OLD"); fi
    for rev in "${order[@]}"; do
        log "round $round: $rev"
        one_round "$rev" "$round"
    done
done
log "done: $OUT"
"$PY" "$HERE/compare_summary.py" "$OUT" "$OLD" "$NEW"
