"""Option parsing for the kafkarepl Spark source and sink (pure Python: no Spark, no client).

Option names follow Spark's built-in Kafka connector. Spark hands a data source its
options in a case-insensitive dict, so every name is matched lowercased. Bad input
raises OptionError naming the option, on the driver, before any task runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

TP = tuple[str, int]  # (topic, partition)

EARLIEST = -2  # Spark's (and ListOffsets') sentinels in offset JSON
LATEST = -1

# Spark Kafka options this source does not implement: refuse them rather than ignore.
UNSUPPORTED = {
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "minoffsetspertrigger", "maxtriggerdelay",
}
# kafka.* settings the connector owns (as in Spark: offsets live in Spark's checkpoint).
SOURCE_OWNED = {
    "auto.offset.reset": "use startingOffsets",
    "enable.auto.commit": "the source never commits offsets to Kafka",
    "key.deserializer": "keys are always read as binary",
    "value.deserializer": "values are always read as binary",
}
SINK_OWNED = {
    "key.serializer": "write key as a binary or string column",
    "value.serializer": "write value as a binary or string column",
}


class OptionError(ValueError):
    """A missing or malformed data source option."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"kafkarepl option '{option}': {problem}")
        self.option = option


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of subscribe / assign / subscribePattern."""

    kind: Literal["subscribe", "assign", "subscribePattern"]
    topics: tuple[str, ...] = ()
    assignment: tuple[TP, ...] = ()
    pattern: str = ""

    def select(self, cluster: Mapping[str, int]) -> list[TP]:
        """The partitions to read, given {topic: partition count} of the cluster. A subscribed
        topic that does not exist yet contributes nothing (streams pick it up later); an
        assigned partition that does not exist is an error."""
        if self.kind == "subscribe":
            return [(t, p) for t in self.topics for p in range(cluster.get(t, 0))]
        if self.kind == "subscribePattern":
            rx = re.compile(self.pattern)
            # Internal topics (__consumer_offsets, ...) are never matched, as with a Kafka consumer.
            return [(t, p) for t in sorted(cluster) if not t.startswith("__") and rx.fullmatch(t)
                    for p in range(cluster[t])]
        missing = [f"{t}-{p}" for t, p in self.assignment if p >= cluster.get(t, 0)]
        if missing:
            raise OptionError("assign", f"no such partition(s) in the cluster: {', '.join(missing)}")
        return list(self.assignment)


OffsetSpec = Literal["earliest", "latest"] | dict[TP, int]


@dataclass(frozen=True)
class SourceOptions:
    kafka: dict[str, str]              # librdkafka settings, bootstrap.servers included
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120_000
    offset_retries: int = 3
    offset_retry_interval_ms: int = 10
    group_id: str | None = None
    data_plane: str = "auto"           # auto | native | librdkafka (see native.py)


@dataclass(frozen=True)
class SinkOptions:
    kafka: dict[str, str]
    topic: str | None = None
    flush_timeout_ms: int = 300_000
    data_plane: str = "auto"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def kafka_params(opts: Mapping[str, str], owned: Mapping[str, str]) -> dict[str, str]:
    """bootstrap.servers plus every `kafka.`-prefixed option, prefix stripped."""
    out = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    for name, why in owned.items():
        if name in out:
            raise OptionError(f"kafka.{name}", f"not allowed: {why}")
    servers = out.get("bootstrap.servers") or opts.get("bootstrap.servers", "")
    if not servers.strip():
        raise OptionError("kafka.bootstrap.servers", "required (host:port[,host:port...])")
    for item in servers.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OptionError("kafka.bootstrap.servers", f"bad server {item.strip()!r}: expected host:port")
    out["bootstrap.servers"] = servers
    return out


def _int(opts: Mapping[str, str], name: str, display: str, default: int | None,
         minimum: int) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(display, f"expected an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(display, f"must be >= {minimum}, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, display: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(display, f"expected true or false, got {raw!r}")


def _json(display: str, raw: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(display, f"invalid JSON ({exc.msg}): {raw!r}") from None
    if not isinstance(value, dict):
        raise OptionError(display, f"expected a JSON object, got {raw!r}")
    return value


def _partition(display: str, topic: str, raw: Any) -> int:  # raw: a JSON key or value
    try:
        p = int(raw)  # JSON object keys are strings: {"t": {"0": 5}}
    except (TypeError, ValueError):
        raise OptionError(display, f"topic {topic!r}: bad partition {raw!r}") from None
    if p < 0 or isinstance(raw, bool):
        raise OptionError(display, f"topic {topic!r}: bad partition {raw!r}")
    return p


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "assign", "subscribepattern") if k in opts]
    if len(given) != 1:
        found = ", ".join(given) or "none"
        raise OptionError("subscribe", f"exactly one of 'subscribe', 'assign', 'subscribePattern' is required (got {found})")
    kind = given[0]
    raw = opts[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe", "empty topic list")
        return Subscription("subscribe", topics=tuple(dict.fromkeys(topics)))
    if kind == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError("subscribePattern", f"bad regular expression {raw!r}: {exc}") from None
        return Subscription("subscribePattern", pattern=raw)
    spec = _json("assign", raw)
    tps: list[TP] = []
    for topic, parts in spec.items():
        if not isinstance(parts, list) or not parts:
            raise OptionError("assign", f'topic {topic!r}: expected a non-empty list of partitions, e.g. {{"t":[0,1]}}')
        tps.extend((topic, _partition("assign", topic, p)) for p in parts)
    if not tps:
        raise OptionError("assign", 'no partitions given, e.g. {"t":[0,1]}')
    return Subscription("assign", assignment=tuple(dict.fromkeys(tps)))


def parse_offsets(display: str, raw: str | None, default: OffsetSpec, allowed: tuple[str, ...],
                  where: str = "here") -> OffsetSpec:
    """"earliest" / "latest" / JSON {"t": {"0": 23, "1": -1}} (-2 earliest, -1 latest)."""
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        if word not in allowed:
            raise OptionError(display, f"{word!r} is not allowed {where} (allowed: {', '.join(allowed)} or JSON)")
        return word  # type: ignore[return-value]
    if not raw.strip().startswith("{"):
        raise OptionError(display, f"expected 'earliest', 'latest' or JSON like {{\"t\":{{\"0\":23}}}}, got {raw!r}")
    out: dict[TP, int] = {}
    for topic, parts in _json(display, raw).items():
        if not isinstance(parts, dict):
            raise OptionError(display, f'topic {topic!r}: expected {{"partition": offset}}')
        for p, off in parts.items():
            if not isinstance(off, int) or isinstance(off, bool) or off < EARLIEST:
                raise OptionError(display, f"{topic}-{p}: bad offset {off!r} (>= 0, -2 earliest, -1 latest)")
            if off == EARLIEST and "earliest" not in allowed:
                raise OptionError(display, f"{topic}-{p}: -2 (earliest) is not allowed {where}")
            if off == LATEST and "latest" not in allowed:
                raise OptionError(display, f"{topic}-{p}: -1 (latest) is not allowed {where}")
            out[(topic, _partition(display, topic, p))] = off
    return out


def _data_plane(opts: Mapping[str, str]) -> str:
    raw = opts.get("dataplane", "auto").strip().lower()
    if raw not in ("auto", "native", "librdkafka"):
        raise OptionError("dataPlane", f"expected auto, native or librdkafka, got {raw!r}")
    return raw


def include_headers(options: Mapping[str, str]) -> bool:
    return _bool(_lower(options), "includeheaders", "includeHeaders", False)


def parse_source(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    opts = _lower(options)
    for name in UNSUPPORTED:
        if name in opts:
            raise OptionError(name, "not supported by the kafkarepl source")
    if streaming and "endingoffsets" in opts:
        raise OptionError("endingOffsets", "only for batch queries; a stream has no end")
    kafka = kafka_params(opts, SOURCE_OWNED)
    group_id = kafka.pop("group.id", None)
    if streaming:
        starting = parse_offsets("startingOffsets", opts.get("startingoffsets"), "latest", ("earliest", "latest"))
    else:
        # As in Spark: a batch must start at a fixed point, so "latest" is refused there.
        starting = parse_offsets("startingOffsets", opts.get("startingoffsets"), "earliest", ("earliest",),
                                 "in a batch query")
    ending = parse_offsets("endingOffsets", opts.get("endingoffsets"), "latest", ("latest",), "as an end")
    return SourceOptions(
        kafka=kafka,
        subscription=parse_subscription(opts),
        starting=starting,
        ending=ending,
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", None, 1),
        min_partitions=_int(opts, "minpartitions", "minPartitions", None, 1),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", "maxRecordsPerPartition", None, 1),
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs", 120_000, 1),  # type: ignore[arg-type]
        offset_retries=_int(opts, "fetchoffset.numretries", "fetchOffset.numRetries", 3, 1),  # type: ignore[arg-type]
        offset_retry_interval_ms=_int(opts, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs", 10, 0),  # type: ignore[arg-type]
        group_id=group_id,
        data_plane=_data_plane(opts),
    )


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    kafka = kafka_params(opts, SINK_OWNED)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "empty topic name")
    return SinkOptions(
        kafka=kafka,
        topic=topic.strip() if topic else None,
        flush_timeout_ms=_int(opts, "flushtimeoutms", "flushTimeoutMs", 300_000, 1),  # type: ignore[arg-type]
        data_plane=_data_plane(opts),
    )
