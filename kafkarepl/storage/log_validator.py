"""What a leader checks in a producer's batches before they are given offsets and
written: Kafka's LogValidator (with UnifiedLog.analyzeAndValidateRecords' size checks).

Pure functions of the bytes, the topic's LogConfig and the time; the log assigns the
offsets, deduplicates and writes. Nothing here touches the disk, so a refused append
leaves the log as it was.
"""

from __future__ import annotations

from kafkarepl import _core
from kafkarepl.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    RecordListTooLargeError,
    RecordValidationError,
)
from kafkarepl.storage.codecs import recompress_batches
from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.records import (
    CONTROL_MASK,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    clear_log_append_time,
    fix_max_timestamps,
)
from kafkarepl.storage.validation import (
    DecompressionBudget,
    check_compressed,
    current_budget,
    records_of,
)


def check_sizes(batches: list, total: int, config: LogConfig, tp: str) -> bool:
    """Enforce max.message.bytes per batch and segment.bytes for the whole set (leader
    and follower appends); returns whether any batch carries a producer id (idempotence
    checks needed)."""
    limit = config.max_message_bytes
    has_pid = False
    for b in batches:
        if b[1] > limit:  # size
            raise MessageTooLargeError(
                f"{tp}: batch at position {b.position} is {b.size} bytes, above max.message.bytes {limit}")
        if b[10] >= 0:  # producer_id
            has_pid = True
    if total > config.segment_bytes:
        raise RecordListTooLargeError(f"{tp}: {total} bytes of records exceed segment.bytes {config.segment_bytes}")
    return has_pid


def validate_leader_append(records, config: LogConfig, tp: str, now_ms: int, control_allowed: bool,
                           client: bool) -> tuple[memoryview, list, bool]:
    """The batches of a leader append, validated and ready for offsets: (buffer, batch
    infos, whether any carries a producer id). The buffer is writable (a read-only one
    is copied once): max timestamps are fixed, LogAppendTime flags cleared and the
    batches re-encoded in the topic's codec in it or in a new one. Raises Kafka's error
    for the first rule broken; see Log.append_as_leader for the rules."""
    buf = records if isinstance(records, memoryview) else memoryview(records)
    if buf.format != "B" or buf.ndim != 1:
        buf = buf.cast("B")
    if buf.readonly:
        buf = memoryview(bytearray(buf))
    if client and len(buf) >= 8:  # Kafka checks it before the batch's CRC
        base = int.from_bytes(buf[:8], "big", signed=True)
        if base != 0:
            raise _base_offset_error(base, tp)
    fixups: list[tuple[int, int]] = []
    ts_bounds = config.timestamp_bounds(now_ms)
    stray: list[int] = []  # batches with a timestamp outside ts_bounds
    batches, compressed = _core.validate_leader_batches(
        buf, config.validate_uncompressed_records, fixups, ts_bounds, stray)
    if not batches:
        raise InvalidRecordError(f"{tp}: no record batches")
    if client and len(batches) > 1:
        for b in batches:
            if b.base_offset != 0:
                raise _base_offset_error(b.base_offset, tp)
        raise InvalidRecordError("Compressed outer record has more than one batch")
    has_pid = check_sizes(batches, len(buf), config, tp)
    if "compact" in config.cleanup_policy:
        _check_keys(buf, batches, tp)
    if not control_allowed and any(b.attributes & CONTROL_MASK for b in batches):  # with a producer id or not
        raise InvalidRecordError(f"{tp}: clients may not write control batches")
    if compressed:
        check_compressed(buf, batches, fixups, indexes=compressed, ts_bounds=ts_bounds, stray=stray)
    if any(b.attributes & TIMESTAMP_TYPE_MASK for b in batches):
        _check_producer_log_append_time(buf, batches, ts_bounds, config.log_append_time)
    if stray and ts_bounds is not None:
        _check_timestamps(buf, batches, sorted(stray), ts_bounds)
    if fixups and not config.log_append_time:
        fix_max_timestamps(buf, batches, fixups)
    target = config.target_codec()
    if target is not None and any(b.attributes & 0x07 != target[0] and not b.attributes & CONTROL_MASK
                                  for b in batches):
        buf, batches = _recompress(buf, batches, *target, config, tp)
    return buf, batches, has_pid


def _base_offset_error(base: int, tp: str) -> InvalidRecordError:
    return InvalidRecordError(f"The baseOffset of the record batch in the append to {tp} should be 0, "
                              f"but it is {base}")


def _check_producer_log_append_time(buf: memoryview, batches: list, ts_bounds: tuple[int, int] | None,
                                    log_append_time: bool) -> None:
    """Batches that arrive flagged LogAppendTime, as Kafka's LogValidator.validateTimestamp
    treats them (a reader gives each record of such a batch its maxTimestamp):
    - in a LogAppendTime topic, or when maxTimestamp is -1: INVALID_TIMESTAMP naming
      every record ("Producer should not set timestamp type to LogAppendTime");
    - in a CreateTime topic, maxTimestamp is every record's timestamp: outside the
      KIP-937 bounds, INVALID_TIMESTAMP naming every record; within them the batch is
      accepted and stored as CreateTime (the flag cleared, maxTimestamp kept, CRC
      redone), as Kafka's in-place setMaxTimestamp(CREATE_TIME, ...) stores it.
    Only flagged batches come here; producers do not flag them, so this is the rare path."""
    restamp: list[int] = []
    for i, b in enumerate(batches):
        if not b.attributes & TIMESTAMP_TYPE_MASK:
            continue
        ts = b.max_timestamp
        if log_append_time or ts == NO_TIMESTAMP:
            errors: list[tuple[int, str | None]] = [
                (index, f"Invalid timestamp type in message {desc}. Producer should not set timestamp "
                        f"type to LogAppendTime.")
                for index, desc in _describe_records(buf, b, ts)]
            raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp",
                                        errors)
        if ts_bounds is not None and not ts_bounds[0] <= ts <= ts_bounds[1]:
            low, high = ts_bounds
            raise InvalidTimestampError(
                "One or more records have been rejected due to invalid timestamp",
                [(index, f"Timestamp {ts} of message with offset {b.base_offset + index} is out of range. "
                         f"The timestamp should be within [{low}, {high}]")
                 for index in range(b.records_count)])
        restamp.append(i)
    for i in restamp:
        batches[i] = clear_log_append_time(buf, batches[i])


def _describe_records(buf: memoryview, b, ts: int) -> list[tuple[int, str]]:
    """(index, Kafka's DefaultRecord.toString) of each record of batch `b`, every one
    read with timestamp `ts` (a LogAppendTime batch's). Refusal path only."""
    recs = records_of(buf[b.position : b.position + b.size], b.attributes,
                      DecompressionBudget(current_budget().limit), b.position)
    return [(index, f"DefaultRecord(offset={b.base_offset + delta}, timestamp={ts}, "
                    f"key={0 if key is None else len(key)} bytes, "
                    f"value={0 if value is None else len(value)} bytes)")
            for index, (delta, key, value) in enumerate(_core.record_fields(recs, b.records_count))]


def _check_keys(buf: memoryview, batches: list, tp: str) -> None:
    """KIP-467: a compacted topic refuses records without a key (Kafka's
    LogValidator): INVALID_RECORD naming the first such record of each batch."""
    errors: list[tuple[int, str | None]] = []
    msg = f"Compacted topic cannot accept message without key in topic partition {tp}."
    for b in batches:
        if b.attributes & CONTROL_MASK:
            continue
        # a compressed one charged to the request's decompression budget, as the validation
        recs = records_of(buf[b.position : b.position + b.size], b.attributes, current_budget(), b.position)
        index = _core.first_keyless_record(recs, b.records_count)
        if index >= 0:
            errors.append((index, msg))
    if errors:
        raise RecordValidationError(msg, errors)


def _recompress(buf: memoryview, batches: list, codec: int, level: int | None, config: LogConfig,
                tp: str) -> tuple[memoryview, list]:
    """compression.type: the batches re-encoded in the topic's codec, as Kafka's leader
    recompresses them (inflated again within a fresh request budget)."""
    out = memoryview(recompress_batches(buf, batches, codec, level, DecompressionBudget(current_budget().limit)))
    batches = _core.validate_batches(out)
    check_sizes(batches, len(out), config, tp)
    return out, batches


def _check_timestamps(buf: memoryview, batches: list, stray: list[int], bounds: tuple[int, int]) -> None:
    """KIP-937: INVALID_TIMESTAMP naming each record of the first batch whose timestamp
    lies outside `bounds` (records without one, -1, are exempt), with Kafka's
    LogValidator messages. Only batches the walk flagged come here; a compressed one
    is inflated again, within one fresh request budget for all of them."""
    budget = DecompressionBudget(current_budget().limit)
    low, high = bounds
    for i in stray:
        b = batches[i]
        recs = records_of(buf[b.position : b.position + b.size], b.attributes, budget, b.position)
        errors: list[tuple[int, str | None]] = [
            (index, f"Timestamp {ts} of message with offset {b.base_offset + index} is out of range. "
                    f"The timestamp should be within [{low}, {high}]")
            for index, ts in _core.records_outside(recs, b.records_count, b.first_timestamp, low, high)
            if ts != NO_TIMESTAMP]
        if errors:
            raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp",
                                        errors)
