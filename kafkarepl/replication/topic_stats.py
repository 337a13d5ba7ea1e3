"""Kafka's BrokerTopicMetrics (kafka.server:type=BrokerTopicMetrics): per topic and for all
topics, counters of what the broker took in and served.

Counted where Kafka counts them: produce requests per partition appended as leader
(TotalProduceRequestsPerSec; BytesInPerSec and MessagesInPerSec for the appended ones;
FailedProduceRequestsPerSec for the unexpected failures, not for a partition that is not
led here or does not exist, nor for a too large or corrupt batch or a disk error, the
errors Kafka's ReplicaManager.appendToLocalLog leaves out); fetch requests per partition
as answered (TotalFetchRequestsPerSec, FailedFetchRequestsPerSec likewise; BytesOutPerSec
for consumers' record bytes); the replication bytes (ReplicationBytesInPerSec fetched as
follower, ReplicationBytesOutPerSec served to followers) for all topics only, as Kafka.

Served as `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}` (all topics: no
topic label), the JMX exporter's usual rendering of Kafka's `...PerSec` meters' Count.
"""

from __future__ import annotations

from kafkarepl.errors import ErrorCode

# Counter slots (Kafka's meter names, less "PerSec").
MESSAGES_IN, BYTES_IN, BYTES_OUT, TOTAL_PRODUCE, FAILED_PRODUCE, TOTAL_FETCH, FAILED_FETCH, \
    BYTES_REJECTED = range(8)
_NAMES = ("messagesin", "bytesin", "bytesout", "totalproducerequests", "failedproducerequests",
          "totalfetchrequests", "failedfetchrequests", "bytesrejected")

# Errors that do not count as failed requests (Kafka's expected ones).
_ROUTINE_PRODUCE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
})
_ROUTINE_FETCH = frozenset({
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.INCONSISTENT_TOPIC_ID,
})


class BrokerTopicStats:
    def __init__(self) -> None:
        self._topics: dict[str, list[int]] = {}
        self._all = [0] * len(_NAMES)
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def _of(self, topic: str) -> list[int]:
        c = self._topics.get(topic)
        if c is None:
            c = self._topics[topic] = [0] * len(_NAMES)
        return c

    def _add(self, topic: str, slot: int, n: int = 1) -> None:
        self._of(topic)[slot] += n
        self._all[slot] += n

    def produce_appended(self, topic: str, size: int, records: int) -> None:
        t, a = self._of(topic), self._all
        t[TOTAL_PRODUCE] += 1
        a[TOTAL_PRODUCE] += 1
        t[BYTES_IN] += size
        a[BYTES_IN] += size
        t[MESSAGES_IN] += records
        a[MESSAGES_IN] += records

    def produce_failed(self, topic: str, error: ErrorCode, size: int) -> None:
        """A partition's append refused with `error` (its batch was `size` bytes)."""
        self._add(topic, TOTAL_PRODUCE)
        if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
            self._add(topic, BYTES_REJECTED, size)
        if error not in _ROUTINE_PRODUCE:
            self._add(topic, FAILED_PRODUCE)

    def fetched(self, topic: str, error: ErrorCode, size: int, follower: bool) -> None:
        """One partition of a Fetch answer: `size` record bytes."""
        t, a = self._of(topic), self._all
        t[TOTAL_FETCH] += 1
        a[TOTAL_FETCH] += 1
        if error not in _ROUTINE_FETCH:
            t[FAILED_FETCH] += 1
            a[FAILED_FETCH] += 1
        if not size:
            return
        if follower:
            self.replication_bytes_out += size
        else:
            t[BYTES_OUT] += size
            a[BYTES_OUT] += size

    def replicated_in(self, size: int) -> None:
        """Record bytes a follower fetch appended here."""
        self.replication_bytes_in += size

    def retain(self, topics: set[str]) -> None:
        """Drop the topics no longer hosted here (Kafka removes a topic's metrics when its
        last partition leaves the broker)."""
        for gone in self._topics.keys() - topics:
            del self._topics[gone]

    def snapshot(self) -> dict[str, float]:
        p = "kafka_server_brokertopicmetrics_"
        out: dict[str, float] = {f"{p}{n}_total": v for n, v in zip(_NAMES, self._all, strict=True)}
        out[f"{p}replicationbytesin_total"] = self.replication_bytes_in
        out[f"{p}replicationbytesout_total"] = self.replication_bytes_out
        for topic, counts in self._topics.items():
            for n, v in zip(_NAMES, counts, strict=True):
                out[f'{p}{n}_total{{topic="{topic}"}}'] = v
        return out
