#!/usr/bin/env bash
# Quickstart: set up, start a local 3-broker replicated cluster, and show it working.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test,fast bash tools/setup.sh
KR=.venv/bin/kafkarepl
PY=.venv/bin/python
DATA=${KAFKAREPL_DATA_DIR:-$PWD/.kafkarepl/quickstart}
BS=127.0.0.1:29092

SDATA=$DATA-secured
SBS=127.0.0.1:29192

for d in "$DATA" "$SDATA"; do
  if [ -f "$d/cluster.json" ]; then $KR cluster down --data-dir "$d" >/dev/null 2>&1 || true; fi
  rm -rf "$d"
done
echo "== starting ZooKeeper and 3 brokers"
$KR cluster up --brokers 3 --base-port 29092 --data-dir "$DATA"
$KR cluster status --data-dir "$DATA"

echo "== creating topic 'orders': 3 partitions, replication factor 3, min.insync.replicas=2"
$KR topics --bootstrap-server $BS --create --topic orders --partitions 3 --replication-factor 3 \
  --config min.insync.replicas=2
$KR topics --bootstrap-server $BS --describe --topic orders

echo "== producing 5 records with kcat (acks=all), consuming them back"
printf 'order-%s\n' 1 2 3 4 5 | kcat -b $BS -P -t orders -p 0 -X acks=all
kcat -b $BS -C -t orders -p 0 -o beginning -e -q -f 'partition %p offset %o: %s\n'

echo "== producing 10,000 records with confluent-kafka (idempotent, acks=all)"
$PY - "$BS" <<'PYEOF'
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "enable.idempotence": True, "acks": "all"})
acked = []
for i in range(10_000):
    p.produce("orders", key=str(i % 3).encode(), value=f"event-{i}".encode(),
              on_delivery=lambda e, m: acked.append(m) if e is None else print("error", e))
    if i % 1000 == 0:
        p.poll(0)
p.flush(30)
print(f"acknowledged: {len(acked)}")
PYEOF

LEADER=$($KR topics --bootstrap-server $BS --describe --topic orders | awk '$4=="0" {print $6}')
echo "== kill -9 broker $LEADER, the leader of orders-0"
$KR cluster stop-broker "$LEADER" --kill --data-dir "$DATA"
sleep 8
ALIVE=$($KR cluster status --data-dir "$DATA" --json | $PY -c 'import json,sys; print(",".join("127.0.0.1:%d" % b["port"] for b in json.load(sys.stdin)["brokers"] if b["alive"]))')
$KR topics --bootstrap-server "$ALIVE" --describe --topic orders
echo "== every acknowledged record is still there (reading from the new leaders)"
$PY - "$ALIVE" <<'PYEOF'
import sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "quickstart", "enable.auto.commit": False})
total = 0
for p in range(3):
    lo, hi = c.get_watermark_offsets(TopicPartition("orders", p), timeout=10)
    total += hi - lo
print(f"records on the surviving replicas: {total} (5 from kcat + 10000)")
PYEOF

echo "== restarting broker $LEADER: it truncates by leader epoch, catches up and rejoins the ISR"
$KR cluster start-broker "$LEADER" --data-dir "$DATA"
sleep 3
$KR topics --bootstrap-server $BS --describe --topic orders
echo "== preferred leader election: leadership of orders-0 goes back to broker $LEADER"
$KR leader-election --bootstrap-server $BS --election-type PREFERRED --topic orders --partition 0
sleep 1
$KR topics --bootstrap-server $BS --describe --topic orders
echo "== a consumer group: subscribe() reads every record, commits, and a restart resumes"
$PY - "$BS" <<'PYEOF'
import sys
import time
from confluent_kafka import Consumer
def consume():
    """Join the group, read until 1 s passes with nothing new after the assignment."""
    assigned = []
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "quickstart-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["orders"], on_assign=lambda consumer, parts: assigned.extend(parts))
    n, last, deadline = 0, None, time.monotonic() + 30
    while time.monotonic() < deadline and (last is None or time.monotonic() - last < 1):
        batch = c.consume(10000, 0.1)
        n += len(batch)
        if assigned and (batch or last is None):
            last = time.monotonic()
    if n:
        c.commit(asynchronous=False)
    c.close()
    return n, len(assigned)
n, parts = consume()
print(f"first member of the group: {parts} partitions assigned, read {n} records, committed")
n, parts = consume()
print(f"after a restart: {parts} partitions assigned, read {n} records (resumed after the commit)")
PYEOF
echo "== a secured cluster (TLS + SCRAM-SHA-512, ACLs on): kafkarepl cluster up --security"
$KR cluster up --brokers 3 --base-port 29192 --zookeeper "127.0.0.1:29091/secured" --security --data-dir "$SDATA"
$KR topics --bootstrap-server $SBS --command-config "$SDATA/security/client.properties" --create --topic payments \
  --partitions 1 --replication-factor 3
echo "secret-1" | kcat -F "$SDATA/security/librdkafka.properties" -b $SBS -P -t payments -X acks=all 2>/dev/null
kcat -F "$SDATA/security/librdkafka.properties" -b $SBS -C -t payments -o beginning -e -q 2>/dev/null \
  | sed 's/^/read over SASL_SSL: /'
if kcat -b $SBS -L -m 3 >/dev/null 2>&1; then echo "UNEXPECTED: a plaintext client got in"; exit 1; fi
echo "a plaintext client gets nothing from the secured cluster"
$KR cluster down --data-dir "$SDATA"

echo
echo "The cluster is still running: '$KR cluster status --data-dir $DATA';"
echo "stop it with '$KR cluster down --data-dir $DATA'."
