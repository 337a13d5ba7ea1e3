"""Driver-side cluster queries for planning: which partitions exist and where each log
starts and ends (ListOffsets earliest/latest), through confluent-kafka's AdminClient as
Spark's Kafka source does since 3.1. One ListOffsets round per leader, not per partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from .options import TP, OptionError

REQUEST_TIMEOUT_S = 30.0


class ClusterView:
    """A thin, reusable AdminClient wrapper. Not picklable on purpose: callers keep it out of
    objects Spark ships to executors."""

    def __init__(self, kafka: Mapping[str, str], retries: int = 3, retry_interval_ms: int = 10) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        try:
            self._admin = AdminClient(dict(kafka))
        except (KafkaException, ValueError, TypeError) as exc:
            # librdkafka rejects unknown or malformed settings here, on the driver.
            raise OptionError("kafka.*", f"rejected by the Kafka client: {exc}") from None
        self._retries = max(1, retries)
        self._retry_s = retry_interval_ms / 1000.0

    def _retry(self, what: str, fn: Any) -> Any:
        from confluent_kafka import KafkaException

        last: Exception | None = None
        for attempt in range(self._retries):
            try:
                return fn()
            except KafkaException as exc:
                last = exc
                if attempt + 1 < self._retries:
                    time.sleep(self._retry_s)
        raise RuntimeError(f"kafkarepl: {what} failed after {self._retries} attempt(s): {last}") from last

    def topics(self) -> dict[str, int]:
        """{topic: partition count} of every topic the cluster knows."""

        def call() -> dict[str, int]:
            md = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
            return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

        return self._retry("Metadata", call)

    def _list_offsets(self, tps: Iterable[TP], earliest: bool) -> dict[TP, int]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        tps = list(tps)
        if not tps:
            return {}
        spec = OffsetSpec.earliest() if earliest else OffsetSpec.latest()

        def call() -> dict[TP, int]:
            futures = self._admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                               request_timeout=REQUEST_TIMEOUT_S)
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

        return self._retry("ListOffsets " + ("earliest" if earliest else "latest"), call)

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list_offsets(tps, earliest=True)

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        """High watermarks: the end of what consumers may read (read_uncommitted)."""
        return self._list_offsets(tps, earliest=False)
