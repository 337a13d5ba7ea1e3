"""KIP-890 part 1 for partition leaders: before the first transactional batch of a
producer's transaction is appended to a partition, its transaction coordinator confirms
the partition was added to that ongoing transaction (AddPartitionsToTxn v4, verify_only;
a direct call when this broker is the coordinator). A late retry of a transaction that
already ended (a "hanging transaction") is refused instead of holding the LSO forever.
`transaction.partition.verification.enable` (default true) turns it off."""

from __future__ import annotations

import logging
from typing import Any

from kafkarepl.client import BrokerConnection
from kafkarepl.coordinator.txn_log import TXN_TOPIC
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from kafkarepl.server.metadata_cache import MetadataCache
from kafkarepl.server.txn_coordinator import TransactionCoordinatorService

log = logging.getLogger(__name__)
# Coordinator trouble is retriable for the producer (Kafka answers NOT_ENOUGH_REPLICAS).
_RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.CONCURRENT_TRANSACTIONS}
TopicPartition = tuple[str, int]


class TransactionVerifier:
    def __init__(self, broker_id: int, metadata: MetadataCache, local: TransactionCoordinatorService,
                 security: Any = None) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.local = local
        self.security = security
        self._conns: dict[int, BrokerConnection] = {}

    async def verify(self, tid: str, producer_id: int, epoch: int,
                     partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        part = self.metadata.partition(TXN_TOPIC, self.local.partition_for(tid))
        if part is None or part.leader < 0:
            return dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        if part.leader == self.broker_id:
            codes = self.local.verify(tid, producer_id, epoch, partitions)
        else:
            codes = await self._remote(part.leader, tid, producer_id, epoch, partitions)
        out = {}
        for tp, code in codes.items():
            if code in _RETRIABLE:
                code = ErrorCode.NOT_ENOUGH_REPLICAS
            elif code is ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            out[tp] = code
        return out

    async def _remote(self, broker: int, tid: str, producer_id: int, epoch: int,
                      partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        body = {"transactions": [{"transactional_id": tid, "producer_id": producer_id, "producer_epoch": epoch,
                                  "verify_only": True,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        try:
            conn = self._conns.get(broker)
            if conn is None or not conn.connected:
                info = self.metadata.broker(broker)
                if info is None:
                    return dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
                conn = BrokerConnection(info.host, info.port, client_id=f"txn-verify-{self.broker_id}",
                                        security=self.security)
                await conn.connect()
                self._conns[broker] = conn
            resp = await conn.send(ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
        except Exception as exc:  # noqa: BLE001 - the coordinator moved: the producer retries
            log.info("transaction verification with broker %d failed: %s", broker, exc)
            self._conns.pop(broker, None)
            return dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        out: dict[TopicPartition, ErrorCode] = dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        for txn in (resp or {}).get("results_by_transaction", []):
            for t in txn["topic_results"]:
                for r in t["results_by_partition"]:
                    out[(t["name"], r["partition_index"])] = ErrorCode(r["partition_error_code"])
        return out

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
