"""Per-log configuration, with Kafka's topic- and broker-level property names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.storage.codecs import LEVEL_RANGES, NAMES

DAY_MS = 24 * 3600 * 1000
LONG_MAX = 2**63 - 1  # Java's Long.MAX_VALUE, Kafka's "unbounded"

# Kafka property name -> (field, converter). Topic names first, then broker (log.*) names.
def _bounded_int(bits: int, kind: str) -> Any:
    """Kafka's INT / LONG parsing: a value outside the type's range is refused (a huge
    segment.index.bytes once made a partition refuse every append)."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def parse(v: Any) -> int:
        n = int(v)
        if not low <= n <= high:
            raise ValueError(f"not a number of type {kind}")
        return n

    return parse


_INT = _bounded_int(32, "INT")
_LONG = _bounded_int(64, "LONG")


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def _ts_type(v: Any) -> str:
    s = str(v).strip()
    if s not in ("CreateTime", "LogAppendTime"):
        raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, not {s!r}")
    return s


def _compression(v: Any) -> str:
    s = str(v).strip().lower()
    if s != "producer" and s not in NAMES:  # Kafka's BrokerCompressionType
        raise ValueError("compression.type must be one of producer, uncompressed, gzip, snappy, lz4, zstd")
    return s


def _opt_int(v: Any) -> int | None:
    if v is None:
        return None
    n = int(v)
    # Kafka's default for flush.messages / flush.ms is Long.MAX_VALUE = never.
    return None if n >= 2**63 - 1 else n


_PROPS: dict[str, tuple[str, Any, int]] = {
    # name: (field, converter, multiplier)
    "segment.bytes": ("segment_bytes", _INT, 1),
    "log.segment.bytes": ("segment_bytes", _INT, 1),
    "segment.ms": ("segment_ms", _LONG, 1),
    "log.roll.ms": ("segment_ms", _LONG, 1),
    "log.roll.hours": ("segment_ms", _INT, 3600 * 1000),
    "segment.jitter.ms": ("segment_jitter_ms", _LONG, 1),
    "log.roll.jitter.ms": ("segment_jitter_ms", _LONG, 1),
    "log.roll.jitter.hours": ("segment_jitter_ms", _INT, 3600 * 1000),
    "index.interval.bytes": ("index_interval_bytes", _INT, 1),
    "log.index.interval.bytes": ("index_interval_bytes", _INT, 1),
    "segment.index.bytes": ("segment_index_bytes", _INT, 1),
    "log.index.size.max.bytes": ("segment_index_bytes", _INT, 1),
    "retention.ms": ("retention_ms", _LONG, 1),
    "log.retention.ms": ("retention_ms", _LONG, 1),
    "log.retention.minutes": ("retention_ms", _INT, 60 * 1000),
    "log.retention.hours": ("retention_ms", _INT, 3600 * 1000),
    "retention.bytes": ("retention_bytes", _LONG, 1),
    "log.retention.bytes": ("retention_bytes", _LONG, 1),
    "max.message.bytes": ("max_message_bytes", _INT, 1),
    "message.max.bytes": ("max_message_bytes", _INT, 1),
    "message.timestamp.type": ("message_timestamp_type", _ts_type, 1),
    "log.message.timestamp.type": ("message_timestamp_type", _ts_type, 1),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _LONG, 1),
    "log.message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _LONG, 1),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _LONG, 1),
    "log.message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _LONG, 1),
    "compression.type": ("compression_type", _compression, 1),
    "compression.gzip.level": ("compression_gzip_level", _INT, 1),
    "compression.lz4.level": ("compression_lz4_level", _INT, 1),
    "compression.zstd.level": ("compression_zstd_level", _INT, 1),
    # Removed by Kafka 4.0 (deprecated by KIP-937 in 3.6), topic and broker
    # (log.message.timestamp.difference.max.ms) config both; a topic that has it keeps its
    # symmetric bound, as Kafka 3.x applied it. No broker default, as in Kafka 4.0.
    "message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", _LONG, 1),
    "file.delete.delay.ms": ("file_delete_delay_ms", _LONG, 1),
    "log.segment.delete.delay.ms": ("file_delete_delay_ms", _LONG, 1),
    "preallocate": ("preallocate", _bool, 1),
    "log.preallocate": ("preallocate", _bool, 1),
    "cleanup.policy": ("cleanup_policy", str, 1),
    "log.cleanup.policy": ("cleanup_policy", str, 1),
    "flush.messages": ("flush_messages", _opt_int, 1),
    "log.flush.interval.messages": ("flush_messages", _opt_int, 1),
    "flush.ms": ("flush_ms", _opt_int, 1),
    "log.flush.interval.ms": ("flush_ms", _opt_int, 1),
    "min.insync.replicas": ("min_insync_replicas", _INT, 1),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool, 1),
    "delete.retention.ms": ("delete_retention_ms", _LONG, 1),
    "log.cleaner.delete.retention.ms": ("delete_retention_ms", _LONG, 1),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float, 1),
    "log.cleaner.min.cleanable.ratio": ("min_cleanable_dirty_ratio", float, 1),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _LONG, 1),
    "log.cleaner.min.compaction.lag.ms": ("min_compaction_lag_ms", _LONG, 1),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _LONG, 1),
    "log.cleaner.max.compaction.lag.ms": ("max_compaction_lag_ms", _LONG, 1),
    # Tiered storage (KIP-405) is not built: a topic may say so (remote.storage.enable=false,
    # the default) and carry the local retention settings, which mean nothing without it,
    # as on a Kafka broker with remote.log.storage.system.enable=false.
    "remote.storage.enable": ("remote_storage_enable", _bool, 1),
    "remote.log.copy.disable": ("remote_log_copy_disable", _bool, 1),
    "remote.log.delete.on.disable": ("remote_log_delete_on_disable", _bool, 1),
    "local.retention.ms": ("local_retention_ms", _LONG, 1),
    "log.local.retention.ms": ("local_retention_ms", _LONG, 1),
    "local.retention.bytes": ("local_retention_bytes", _LONG, 1),
    "log.local.retention.bytes": ("local_retention_bytes", _LONG, 1),
    # A no-op in Kafka 4.0 (no message format v0/v1 to convert to), still a topic config.
    "message.downconversion.enable": ("message_downconversion_enable", _bool, 1),
    "log.message.downconversion.enable": ("message_downconversion_enable", _bool, 1),
    # kafkarepl's own (docs/operations.md "Limits"): Kafka always walks these records
    "kafkarepl.validate.uncompressed.records": ("validate_uncompressed_records", _bool, 1),
}

# A topic-level name beats a broker-level one; among broker names for one setting in
# several units, Kafka prefers ms over minutes over hours.
_PRECEDENCE = {"log.roll.ms": 2, "log.roll.hours": 1, "log.roll.jitter.ms": 2, "log.roll.jitter.hours": 1,
               "log.retention.ms": 3,
               "log.retention.minutes": 2, "log.retention.hours": 1}


def _rank(name: str) -> int:
    if name.startswith("log.") or name == "message.max.bytes":
        return _PRECEDENCE.get(name, 0)
    return 10


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    # Each segment rolls up to this much before segment.ms (a random share, drawn per
    # segment): partitions created together do not all roll at the same moment.
    segment_jitter_ms: int = 0
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 << 20
    retention_ms: int = 7 * DAY_MS  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    # KIP-937: how far a CreateTime record's timestamp may lie before / after the broker's
    # clock (Kafka 4.0's defaults: unbounded / one hour, KIP-1030); INVALID_TIMESTAMP.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    message_timestamp_difference_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    # The codec the leader stores batches with (recompressing those sent in another one),
    # or "producer": as sent. Levels: KIP-390's, -1 / 9 / 3 being Kafka's defaults.
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = DAY_MS  # tombstones of a compacted topic live this long
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    flush_messages: int | None = None  # None = never force (rely on replication)
    flush_ms: int | None = None
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    # How long a retired segment's .log descriptor stays open (its file already unlinked)
    # for Fetch answers still sending from it: Kafka's file.delete.delay.ms, the time its
    # `.deleted` files stay before removal (storage/log.py, Log._close_later).
    file_delete_delay_ms: int = 60_000
    # Kafka's preallocate: parsed and validated, not honoured (docs/operations.md): on
    # Linux Kafka's RandomAccessFile.setLength only makes a sparse file.
    preallocate: bool = False
    # Tiered storage settings: accepted as Kafka accepts them with tiered storage off.
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    local_retention_ms: int = -2  # -2: retention.ms
    local_retention_bytes: int = -2  # -2: retention.bytes
    message_downconversion_enable: bool = True
    # Walk the records of uncompressed produced batches too (compressed ones always are),
    # as Kafka's LogValidator does: a CRC-valid batch with malformed records would
    # otherwise be stored and break every consumer of the partition.
    validate_uncompressed_records: bool = True

    def __post_init__(self) -> None:
        problems = []
        if self.segment_bytes < 14:
            problems.append(f"segment.bytes {self.segment_bytes} < 14")
        if self.segment_ms < 1:
            problems.append(f"segment.ms {self.segment_ms} < 1")
        if self.segment_jitter_ms < 0:
            problems.append(f"segment.jitter.ms {self.segment_jitter_ms} < 0")
        if self.segment_index_bytes < 12:
            problems.append(f"segment.index.bytes {self.segment_index_bytes} < 12")
        if self.index_interval_bytes < 0:
            problems.append(f"index.interval.bytes {self.index_interval_bytes} < 0")
        if min(self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms,
               self.message_timestamp_difference_max_ms) < 0:
            problems.append("message.timestamp.before.max.ms / after.max.ms / difference.max.ms must be >= 0")
        if not (self.compression_gzip_level == -1 or 1 <= self.compression_gzip_level <= 9):
            problems.append(f"compression.gzip.level {self.compression_gzip_level} not -1 or in [1, 9]")
        for codec, name, value in ((3, "lz4", self.compression_lz4_level), (4, "zstd", self.compression_zstd_level)):
            low, high = LEVEL_RANGES[codec]
            if not low <= value <= high:
                problems.append(f"compression.{name}.level {value} not in [{low}, {high}]")
        if self.file_delete_delay_ms < 0:
            problems.append(f"file.delete.delay.ms {self.file_delete_delay_ms} < 0")
        if self.max_message_bytes < 0:
            problems.append(f"max.message.bytes {self.max_message_bytes} < 0")
        if self.min_insync_replicas < 1:
            problems.append(f"min.insync.replicas {self.min_insync_replicas} < 1")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            problems.append(f"min.cleanable.dirty.ratio {self.min_cleanable_dirty_ratio} not in [0, 1]")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0 or self.max_compaction_lag_ms < 1:
            problems.append("delete.retention.ms / min.compaction.lag.ms must be >= 0, max.compaction.lag.ms >= 1")
        elif self.min_compaction_lag_ms > self.max_compaction_lag_ms:  # as Kafka's LogConfig.validateValues
            problems.append(f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                            f"max.compaction.lag.ms ({self.max_compaction_lag_ms})")
        policies = [p.strip() for p in self.cleanup_policy.split(",") if p.strip()]
        if any(p not in ("compact", "delete") for p in policies):  # Kafka's ValidList.in(compact, delete)
            problems.append(f"cleanup.policy {self.cleanup_policy[:100]!r}: a list of compact and delete")
        if self.remote_storage_enable:  # Kafka's words, from a broker without tiered storage
            problems.append("Tiered Storage functionality is disabled in the broker. "
                            "Topic cannot be configured with remote log storage.")
        if min(self.local_retention_ms, self.local_retention_bytes) < -2:
            problems.append("local.retention.ms / local.retention.bytes must be >= -2")
        if problems:
            raise KafkaError("; ".join(problems), ErrorCode.INVALID_CONFIG)

    def random_segment_jitter(self, draw: Callable[[int], int]) -> int:
        """A new segment's roll jitter (Kafka's LogConfig.randomSegmentJitter): draw(n) is
        uniform in [0, n), n the smaller of segment.jitter.ms and segment.ms."""
        if self.segment_jitter_ms == 0:
            return 0
        return draw(min(self.segment_jitter_ms, self.segment_ms))

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def target_codec(self) -> tuple[int, int | None] | None:
        """(codec, level) the leader stores batches with; None: as the producer sent them."""
        if self.compression_type == "producer":
            return None
        codec = NAMES[self.compression_type]
        level = {1: self.compression_gzip_level, 3: self.compression_lz4_level, 4: self.compression_zstd_level}
        return codec, level.get(codec)

    def timestamp_bounds(self, now_ms: int) -> tuple[int, int] | None:
        """[low, high] a CreateTime record's timestamp must lie in at `now_ms` (KIP-937),
        as int64 values; None when the topic stamps LogAppendTime itself."""
        if self.log_append_time:
            return None
        before = min(self.message_timestamp_before_max_ms, self.message_timestamp_difference_max_ms)
        after = min(self.message_timestamp_after_max_ms, self.message_timestamp_difference_max_ms)
        return max(now_ms - before, -LONG_MAX - 1), min(now_ms + after, LONG_MAX)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """A config from Kafka property names (topic or broker level) over `base`
        (default: Kafka's defaults). Unknown names are ignored: a topic config holds
        many settings the log does not use. Bad values raise INVALID_CONFIG."""
        values: dict[str, Any] = {}
        rank: dict[str, int] = {}
        for name, raw in props.items():
            spec = _PROPS.get(name)
            if spec is None:
                continue
            field, conv, mult = spec
            prec = _rank(name)
            if rank.get(field, -1) > prec:
                continue
            try:
                value = conv(raw)
            except (TypeError, ValueError) as exc:
                raise KafkaError(f"invalid value {raw!r} for {name}: {exc}",
                                 ErrorCode.INVALID_CONFIG) from None
            if mult != 1 and value is not None:
                value *= mult
            values[field] = value
            rank[field] = prec
        return dataclasses.replace(base or cls(), **values)
