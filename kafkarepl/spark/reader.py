"""Batch and streaming readers: plan offset ranges on the driver, read them on executors.

Planning (driver): Metadata picks the partitions, ListOffsets gives each log's
[earliest, latest), the options fix [start, end) per partition, and each range
becomes one InputPartition (or several when minPartitions / maxRecordsPerPartition
ask). Reading (executor): consume.read_range fetches exactly that range.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from .admin import ClusterView
from .offsets import (
    OffsetRange,
    check_available,
    from_json,
    plan_ranges,
    rate_limit,
    resolve,
    to_json,
)
from .options import TP, OptionError, SourceOptions

try:  # admission control and Trigger.AvailableNow for Python sources: PySpark 4.2+
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # pragma: no cover - older PySpark
    ADMISSION_CONTROL = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Placeholder: this PySpark cannot run Trigger.AvailableNow on Python sources."""


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: offsets [start, end) of topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


def arrow_schema(schema: StructType) -> Any:
    """The Arrow schema Spark expects from read() for `schema` (it compares exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # PySpark before the timezone argument
        return to_arrow_schema(schema)


class _RangeReading:
    """read(): the executor half shared by the batch and the stream reader."""

    options: SourceOptions
    schema: StructType

    def read(self, partition: InputPartition) -> Iterator[Any]:
        p: KafkaInputPartition = partition  # type: ignore[assignment]
        o = self.options
        r = OffsetRange(p.topic, p.partition, p.start, p.end)
        if o.data_plane == "native":
            from .fetch import read_range_native

            yield from read_range_native(o.kafka, r, arrow_schema(self.schema), o.fail_on_data_loss,
                                         o.poll_timeout_ms)
            return
        from .consume import read_range

        yield from read_range(o.kafka, o.group_id, r, arrow_schema(self.schema), o.fail_on_data_loss,
                              o.poll_timeout_ms)

    def _cluster(self) -> ClusterView:
        o = self.options
        return ClusterView(o.kafka, o.offset_retries, o.offset_retry_interval_ms)

    def _to_partitions(self, start: dict[TP, int], end: dict[TP, int]) -> list[KafkaInputPartition]:
        o = self.options
        ranges = plan_ranges(start, end, o.min_partitions, o.max_records_per_partition)
        return [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in ranges]


class KafkareplBatchReader(_RangeReading, DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        view = self._cluster()
        tps = o.subscription.select(view.topics())
        earliest, latest = view.earliest(tps), view.latest(tps)
        start = resolve(o.starting, tps, earliest, latest, "earliest", "startingOffsets")
        end = resolve(o.ending, tps, earliest, latest, "latest", "endingOffsets")
        for (t, p), e in end.items():
            if e > latest[(t, p)]:
                raise OptionError("endingOffsets", f"{t}-{p}: offset {e} is beyond the end of the log ({latest[(t, p)]})")
        start = check_available(start, earliest, latest, o.fail_on_data_loss)
        for (t, p), s in start.items():
            if s > end[(t, p)]:
                raise OptionError("startingOffsets", f"{t}-{p}: start {s} is after the end {end[(t, p)]}")
        return self._to_partitions(start, end)


class KafkareplStreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"topic": {"partition": offset}}: the next offset to read per partition.
    Partitions that appear later (new topics matching the subscription, added partitions)
    start at their earliest offset."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        if options.max_offsets_per_trigger and not ADMISSION_CONTROL:
            raise OptionError("maxOffsetsPerTrigger", "needs PySpark >= 4.2 (admission control for Python sources)")
        self.options = options
        self.schema = schema
        self._view: ClusterView | None = None
        self._target: dict[TP, int] | None = None   # Trigger.AvailableNow stops here
        self._last_latest: dict[TP, int] | None = None
        self._initial: dict | None = None

    def __getstate__(self) -> dict:
        # The reader is pickled to executors for read(); the AdminClient stays on the driver.
        state = dict(self.__dict__)
        state["_view"] = None
        return state

    def _admin(self) -> ClusterView:
        if self._view is None:
            self._view = self._cluster()
        return self._view

    def _latest(self) -> dict[TP, int]:
        """Metadata (new partitions) + ListOffsets latest: one round each."""
        view = self._admin()
        tps = self.options.subscription.select(view.topics())
        latest = view.latest(tps)
        self._last_latest = latest
        return latest

    def initialOffset(self) -> dict:
        # Spark asks more than once while a query starts; the answer must not change in
        # between (startingOffsets=latest would move), and asking again costs round trips.
        if self._initial is None:
            if self._target is not None:  # availableNow: its snapshot of the topics and ends
                tps, latest = list(self._target), self._target
            else:
                view = self._admin()
                tps = self.options.subscription.select(view.topics())
                latest = view.latest(tps)
            starting = self.options.starting
            needs_earliest = not isinstance(starting, str) or starting == "earliest"
            earliest = self._admin().earliest(tps) if needs_earliest else {}
            self._initial = to_json(resolve(starting, tps, earliest, latest, "earliest", "startingOffsets"))
        return self._initial

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        begin = from_json(start)
        # availableNow reads what existed when the query started (as Spark's Kafka source):
        # its end offsets are fixed, so no Metadata or ListOffsets round trip per micro-batch.
        latest = self._target if self._target is not None else self._latest()
        # Never move a partition backwards (a truncated log, a deleted topic): Spark's
        # offsets must be monotonic; lost data is detected when the range is read.
        end = {tp: max(latest.get(tp, off), off) for tp, off in begin.items()}
        new = [tp for tp in latest if tp not in begin]
        base = {**(self._admin().earliest(new) if new else {}), **begin}
        for tp in new:
            end[tp] = max(latest[tp], base[tp])
        if self._target is not None:
            end = {tp: max(base[tp], min(e, self._target.get(tp, base[tp]))) for tp, e in end.items()}
        if ADMISSION_CONTROL and isinstance(limit, ReadMaxRows):
            end = rate_limit(base, end, limit.max_rows)
        return to_json(end)

    def getDefaultReadLimit(self) -> Any:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._last_latest) if self._last_latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s, e = from_json(start), from_json(end)
        e = {tp: off for tp, off in e.items() if off > s.get(tp, -1)}
        if not e:
            return []
        earliest = self._admin().earliest(list(e))
        s = {**{tp: earliest[tp] for tp in e if tp not in s}, **{tp: s[tp] for tp in e if tp in s}}
        s = check_available(s, earliest, e, self.options.fail_on_data_loss)
        return self._to_partitions(s, e)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint owns the offsets; none are committed to Kafka."""

    def stop(self) -> None:
        self._view = None
