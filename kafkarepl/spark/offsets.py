"""Offset arithmetic for the Spark source (pure Python, unit-tested without Spark).

Offsets are {(topic, partition): offset} maps inside the package; Spark's streaming
checkpoint sees them as JSON {"topic": {"partition": offset}}, the layout of Spark's
Kafka source. A range [start, end) is half-open: `end` is the first offset not read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .options import EARLIEST, LATEST, TP, OffsetSpec, OptionError


class DataLossError(RuntimeError):
    """Offsets Spark wants to read are gone (retention, truncation). failOnDataLoss=false
    turns this into skipping to what is still there."""


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(data: Mapping[str, Mapping[str, int]] | None) -> dict[TP, int]:
    return {(t, int(p)): int(o) for t, parts in (data or {}).items() for p, o in parts.items()}


def resolve(spec: OffsetSpec, tps: Iterable[TP], earliest: Mapping[TP, int],
            latest: Mapping[TP, int], unnamed: str, option: str) -> dict[TP, int]:
    """Concrete offsets for `tps` from a startingOffsets/endingOffsets spec. Partitions a JSON
    spec does not name get `unnamed` ("earliest"/"latest"); naming a partition that is not
    read is an error (a typo would otherwise be silently ignored)."""
    tps = list(tps)
    if isinstance(spec, str):
        src = latest if spec == "latest" else earliest
        return {tp: src[tp] for tp in tps}
    stray = sorted(set(spec) - set(tps))
    if stray:
        raise OptionError(option, "names partition(s) not being read: " + ", ".join(f"{t}-{p}" for t, p in stray))
    out = {}
    for tp in tps:
        off = spec.get(tp, EARLIEST if unnamed == "earliest" else LATEST)
        out[tp] = earliest[tp] if off == EARLIEST else latest[tp] if off == LATEST else off
    return out


def check_available(start: Mapping[TP, int], earliest: Mapping[TP, int], latest: Mapping[TP, int],
                    fail_on_data_loss: bool) -> dict[TP, int]:
    """Move starts that fall outside [earliest, latest] back inside, or raise DataLossError.
    Below earliest: deleted by retention. Above latest: the log was truncated under us."""
    out = dict(start)
    for tp, off in start.items():
        lo, hi = earliest.get(tp), latest.get(tp)
        if lo is None or hi is None:
            continue
        if off < lo or off > hi:
            if fail_on_data_loss:
                raise DataLossError(
                    f"{tp[0]}-{tp[1]}: offset {off} is no longer available (the log holds [{lo}, {hi})); "
                    "records may have been deleted by retention or truncated. Set failOnDataLoss=false "
                    "to skip to the available records.")
            out[tp] = lo if off < lo else hi
    return out


def split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`parts` contiguous, nearly equal pieces of r (none empty)."""
    parts = max(1, min(parts, r.size))
    bounds = [r.start + (r.size * i) // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def plan_ranges(start: Mapping[TP, int], end: Mapping[TP, int], min_partitions: int | None = None,
                max_records: int | None = None) -> list[OffsetRange]:
    """One range per topic partition with data, split so that no range holds more than
    `max_records` offsets and, when there are fewer than `min_partitions` ranges, large
    partitions are cut in proportion to their size (Spark's minPartitions semantics)."""
    ranges = [OffsetRange(t, p, start.get((t, p), e), e) for (t, p), e in sorted(end.items())]
    ranges = [r for r in ranges if r.size > 0]
    parts = {r: 1 for r in ranges}
    if max_records:
        parts = {r: math.ceil(r.size / max_records) for r in ranges}
    total = sum(r.size for r in ranges)
    if min_partitions and sum(parts.values()) < min_partitions and total:
        parts = {r: max(n, round(r.size / total * min_partitions)) for r, n in parts.items()}
    return [piece for r in ranges for piece in split(r, parts[r])]


def rate_limit(start: Mapping[TP, int], end: Mapping[TP, int], max_records: int) -> dict[TP, int]:
    """Cap end so at most max_records offsets are read in total, shared among partitions in
    proportion to their backlog (as Spark's maxOffsetsPerTrigger). Shares are floored and the
    leftover goes to the largest fractional parts, so the total is exactly the cap."""
    backlog = {tp: max(0, e - start.get(tp, e)) for tp, e in end.items()}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(end)
    shares = {tp: n * max_records / total for tp, n in backlog.items()}
    take = {tp: math.floor(s) for tp, s in shares.items()}
    leftover = max_records - sum(take.values())
    for tp in sorted(shares, key=lambda tp: (take[tp] - shares[tp], tp))[:leftover]:
        take[tp] += 1
    return {tp: start.get(tp, e) + take[tp] if tp in start else e for tp, e in end.items()}
