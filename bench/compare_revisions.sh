#!/usr/bin/env bash
# Broker throughput and latency of two revisions, measured in ONE run, interleaved, so each
# new/old ratio pairs figures taken a minute apart on the same (noisy, shared) machine.
#
#   bench/compare_revisions.sh OLD_REV NEW_REV
#   RUNS=3 BASE_PORT=27092 OUT=/tmp/cmp.jsonl bench/compare_revisions.sh 0e51837 cd1d6ba
#   python bench/compare_summary.py /tmp/cmp.jsonl        # (also printed at the end)
#
# Builds: each revision is checked out as a detached `git worktree` under a temp dir and
# its C core is built in place there (`PYTHON setup.py build_ext --inplace -q`); nothing
# is built from or imported out of this checkout's working tree (others edit it). Every
# kafkarepl command runs as `PYTHONPATH=<worktree> PYTHON -m kafkarepl.cli.main ...` with
# the worktree as cwd; the brokers `cluster up` spawns inherit that, and the script checks
# each broker process (its environ's PYTHONPATH and the _core .so mapped in /proc/PID/maps
# must be the worktree's) and stops if not.
#
# Client: the NEW revision's bench/e2e.py (and confluent-kafka / kcat of PYTHON's venv)
# for both revisions, so only the brokers differ.
#
# Per round and revision (rounds alternate the order: old,new then new,old, to cancel
# drift): a fresh 3-broker cluster (+ its ZooKeeper) in a fresh data dir; topics created
# with that revision's CLI; produce RECORDS x 100 B to 6 partitions RF=1 acks=1; produce
# the same RF=3 acks=all min.insync.replicas=2; consume the RF=1 topic with the Python
# consumer and with kcat; e2e latency at LAT_RATE msg/s RF=3 acks=all for LAT_SECONDS;
# then `cluster down` and the data dir deleted. Each result is one JSON line in $OUT,
# tagged with "rev" (short hash), "commit", "role" (old/new), "round" and "slot" (1st or
# 2nd in its round). e2e.py adds "load1" (1-min load average) to every line.
#
# Environment: PYTHON (default: <repo>/.venv/bin/python), RUNS (3), RECORDS (1000000),
# BASE_PORT (27092; ZooKeeper on BASE_PORT-1), LAT_RATE (5000), LAT_SECONDS (15), OUT.
# If PYTHON lacks the build requirements (Cython; setuptools >= 77), they are
# pip-installed into the temp dir and put on PYTHONPATH for the builds only. Worktrees, clusters
# and data are removed at exit (trap), also on failure or Ctrl-C.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(git -C "$HERE" rev-parse --show-toplevel)"
PY="${PYTHON:-$REPO/.venv/bin/python}"
usage="usage: compare_revisions.sh OLD_REV NEW_REV"
OLD_FULL="$(git -C "$REPO" rev-parse --verify "${1:?$usage}^{commit}")"
NEW_FULL="$(git -C "$REPO" rev-parse --verify "${2:?$usage}^{commit}")"
OLD="${OLD_FULL:0:7}"
NEW="${NEW_FULL:0:7}"
[[ "$OLD" != "$NEW" ]] || { echo "OLD_REV and NEW_REV are the same commit" >&2; exit 2; }
RUNS="${RUNS:-3}"
RECORDS="${RECORDS:-1000000}"
BASE_PORT="${BASE_PORT:-27092}"
LAT_RATE="${LAT_RATE:-5000}"
LAT_SECONDS="${LAT_SECONDS:-15}"
OUT="${OUT:-/tmp/compare-$OLD-$NEW-$(date -u +%Y%m%dT%H%M%S).jsonl}"
WORK="$(mktemp -d /tmp/kafkarepl-compare.XXXXXX)"
B="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
E2E="$WORK/src-$NEW/bench/e2e.py"  # the same client file for both revisions

log() { echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }

kill_listed_pids() {  # the processes a cluster.json lists (ours), if `cluster down` failed
    [[ -f "$1/cluster.json" ]] || return 0
    local pid
    for pid in $("$PY" -c "import json, sys
s = json.load(open(sys.argv[1]))
print(' '.join(str(p) for p in [s.get('zookeeper_pid')] + [b.get('pid') for b in s['brokers'].values()] if p))" \
        "$1/cluster.json" 2>/dev/null); do
        kill -9 "$pid" 2>/dev/null || true
    done
}

cleanup() {
    local rc=$? rev
    trap - EXIT INT TERM
    for rev in "$OLD" "$NEW"; do
        if [[ -f "$WORK/data-$rev/cluster.json" ]]; then
            (cd "$WORK/src-$rev" 2>/dev/null && PYTHONPATH="$WORK/src-$rev" timeout 60 "$PY" \
                -m kafkarepl.cli.main cluster down --data-dir "$WORK/data-$rev" >/dev/null 2>&1) || true
            kill_listed_pids "$WORK/data-$rev"
        fi
        git -C "$REPO" worktree remove --force "$WORK/src-$rev" >/dev/null 2>&1 || true
    done
    git -C "$REPO" worktree prune >/dev/null 2>&1 || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in $((BASE_PORT - 1)) "$BASE_PORT" $((BASE_PORT + 1)) $((BASE_PORT + 2)); do
    if ss -ltnH "sport = :$port" | grep -q .; then
        echo "port $port is in use; choose another BASE_PORT" >&2
        exit 2
    fi
done

# ---------------------------------------------------------------- worktrees and builds
# pip builds the venv's kafkarepl with build isolation, so PYTHON may lack Cython, and its
# setuptools may be older than 77 (needed for pyproject's SPDX `license = "..."` string).
BUILD_PATH=""
if ! "$PY" -c "import Cython, setuptools
assert int(setuptools.__version__.split('.')[0]) >= 77" 2>/dev/null; then
    log "build requirements into $WORK/build-deps (Cython, setuptools>=77: $PY lacks them)"
    "$PY" -m pip install -q --disable-pip-version-check --ignore-installed \
        --target "$WORK/build-deps" "cython>=3.0" "setuptools>=77" >&2
    BUILD_PATH="$WORK/build-deps"
fi
for rev in "$OLD" "$NEW"; do
    src="$WORK/src-$rev"
    log "worktree + build of $rev in $src"
    git -C "$REPO" worktree add --detach "$src" "$rev" >/dev/null 2>&1
    if ! (cd "$src" && PYTHONPATH="$BUILD_PATH" "$PY" setup.py build_ext --inplace -q \
            >"$WORK/build-$rev.log" 2>&1); then
        cat "$WORK/build-$rev.log" >&2
        exit 1
    fi
    core="$(cd "$src" && PYTHONPATH="$src" "$PY" -c "import kafkarepl._core as c; print(c.__file__)")"
    [[ "$core" == "$src/"* ]] || { echo "$rev: kafkarepl._core imported from $core" >&2; exit 1; }
    mkdir -p "$WORK/bin-$rev"  # `kafkarepl` on PATH for bench/e2e_cluster.py: this revision's CLI
    printf '#!/bin/sh\nPYTHONPATH="%s" exec "%s" -m kafkarepl.cli.main "$@"\n' "$src" "$PY" \
        >"$WORK/bin-$rev/kafkarepl"
    chmod +x "$WORK/bin-$rev/kafkarepl"
done
log "results to $OUT"

# ---------------------------------------------------------------- one round of one revision
verify_brokers() {  # verify_brokers SRC DATA: every broker runs SRC's code; prints the .so
    "$PY" - "$1" "$2" <<'EOF'
import json, os, sys
src, data = sys.argv[1], sys.argv[2]
brokers = json.load(open(os.path.join(data, "cluster.json")))["brokers"]
cores = set()
for bid, info in sorted(brokers.items()):
    pid = info["pid"]
    env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    if f"PYTHONPATH={src}".encode() not in env:
        sys.exit(f"broker {bid} (pid {pid}): PYTHONPATH is not {src}")
    maps = {line.split()[-1] for line in open(f"/proc/{pid}/maps") if "/kafkarepl/_core" in line}
    if not maps or any(not m.startswith(src + "/") for m in maps):
        sys.exit(f"broker {bid} (pid {pid}): _core mapped from {sorted(maps) or 'nowhere'}")
    cores |= maps
print(" ".join(sorted(cores)))
EOF
}

one_round() {  # one_round REV ROLE ROUND SLOT
    local rev=$1 role=$2 round=$3 slot=$4
    local src="$WORK/src-$rev" data="$WORK/data-$rev"
    local commit; commit="$(git -C "$src" rev-parse HEAD)"
    export PYTHONPATH="$src" PATH="$WORK/bin-$rev:$PATH"
    cd "$src"  # never this checkout: `python -m` puts the cwd first on sys.path
    tag() {
        "$PY" -c "import json, sys
for line in sys.stdin:
    if line.startswith('{'):
        r = json.loads(line)
        r.update(rev=sys.argv[1], commit=sys.argv[2], role=sys.argv[3], round=int(sys.argv[4]),
                 slot=int(sys.argv[5]))
        print(json.dumps(r), flush=True)" "$rev" "$commit" "$role" "$round" "$slot" | tee -a "$OUT"
    }
    topic() {  # topic NAME RF [--config k=v]...
        "$PY" -m kafkarepl.cli.main topics --bootstrap-server "127.0.0.1:$BASE_PORT" --create \
            --topic "$1" --partitions 6 --replication-factor "$2" "${@:3}" >/dev/null
    }
    local t0 t1 cores
    t0=$(date +%s.%N)
    "$PY" -m kafkarepl.cli.main cluster up --brokers 3 --base-port "$BASE_PORT" \
        --data-dir "$data" >/dev/null
    t1=$(date +%s.%N)
    cores="$(verify_brokers "$src" "$data")"
    "$PY" -c "import json, os, sys
print(json.dumps({'bench': 'cluster-up', 'brokers': 3, 'seconds': round(float(sys.argv[2]) - float(sys.argv[1]), 3),
                  'core_so': sys.argv[3], 'verified': True, 'load1': round(os.getloadavg()[0], 2)}))" \
        "$t0" "$t1" "$cores" | tag
    topic r1 1
    topic r3 3 --config min.insync.replicas=2
    topic lat 3 --config min.insync.replicas=2
    "$PY" "$E2E" produce --bootstrap "$B" --topic r1 --records "$RECORDS" --size 100 --acks 1 \
        --data-dir "$data" | tag
    "$PY" "$E2E" produce --bootstrap "$B" --topic r3 --records "$RECORDS" --size 100 --acks all \
        --data-dir "$data" | tag
    "$PY" "$E2E" consume --bootstrap "$B" --topic r1 --data-dir "$data" | tag
    "$PY" "$E2E" consume-kcat --bootstrap "$B" --topic r1 --data-dir "$data" | tag
    "$PY" "$E2E" latency --bootstrap "$B" --topic lat --rate "$LAT_RATE" --seconds "$LAT_SECONDS" \
        --warmup 2 | tag
    t0=$(date +%s.%N)
    "$PY" -m kafkarepl.cli.main cluster down --data-dir "$data" >/dev/null
    t1=$(date +%s.%N)
    "$PY" -c "import json, os, sys
print(json.dumps({'bench': 'cluster-down', 'seconds': round(float(sys.argv[2]) - float(sys.argv[1]), 3),
                  'load1': round(os.getloadavg()[0], 2)}))" "$t0" "$t1" | tag
    rm -rf "$data"
}

for round in $(seq 1 "$RUNS"); do
    if (( round % 2 )); then order=("$OLD old" "$NEW new"); else order=("$NEW new" "$OLD old"); fi
    slot=0
    for entry in "${order[@]}"; do
        slot=$((slot + 1))
        read -r rev role <<<"$entry"
        log "round $round/$RUNS, slot $slot: $role $rev"
        (one_round "$rev" "$role" "$round" "$slot")  # subshell: cwd and env stay per revision
    done
done
log "done: $OUT"
"$PY" "$HERE/compare_summary.py" "$OUT"
