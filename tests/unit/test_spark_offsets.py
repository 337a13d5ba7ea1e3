"""Offset planning of the kafkarepl Spark source (no Spark needed): resolving offset
specs, data-loss checks, splitting ranges into tasks and maxOffsetsPerTrigger."""

from __future__ import annotations

import random

import pytest

from kafkarepl.spark.offsets import (
    DataLossError,
    OffsetRange,
    check_available,
    from_json,
    plan_ranges,
    rate_limit,
    resolve,
    split,
    to_json,
)
from kafkarepl.spark.options import OptionError

TPS = [("t", 0), ("t", 1), ("u", 0)]
EARLIEST = {("t", 0): 5, ("t", 1): 0, ("u", 0): 0}
LATEST = {("t", 0): 100, ("t", 1): 10, ("u", 0): 0}


def test_json_round_trip_uses_string_partitions():
    offsets = {("t", 1): 7, ("t", 0): 3, ("u", 0): 0}
    j = to_json(offsets)
    assert j == {"t": {"0": 3, "1": 7}, "u": {"0": 0}}
    assert from_json(j) == offsets
    assert from_json(None) == {}


def test_resolve_words_and_json():
    assert resolve("earliest", TPS, EARLIEST, LATEST, "earliest", "x") == EARLIEST
    assert resolve("latest", TPS, EARLIEST, LATEST, "latest", "x") == LATEST
    spec = {("t", 0): 50, ("t", 1): -1}
    assert resolve(spec, TPS, EARLIEST, LATEST, "earliest", "x") == {("t", 0): 50, ("t", 1): 10, ("u", 0): 0}
    assert resolve({("t", 0): -2}, TPS, EARLIEST, LATEST, "latest", "x") == {("t", 0): 5, ("t", 1): 10, ("u", 0): 0}


def test_resolve_refuses_partitions_not_read():
    with pytest.raises(OptionError, match="'startingOffsets'.*t-7"):
        resolve({("t", 7): 0}, TPS, EARLIEST, LATEST, "earliest", "startingOffsets")


def test_check_available_detects_deleted_and_truncated_offsets():
    assert check_available({("t", 0): 5}, EARLIEST, LATEST, True) == {("t", 0): 5}
    with pytest.raises(DataLossError, match="t-0: offset 2"):
        check_available({("t", 0): 2}, EARLIEST, LATEST, True)
    with pytest.raises(DataLossError, match="t-1: offset 11"):
        check_available({("t", 1): 11}, EARLIEST, LATEST, True)
    assert check_available({("t", 0): 2, ("t", 1): 11}, EARLIEST, LATEST, False) == {("t", 0): 5, ("t", 1): 10}


def test_split_is_contiguous_and_never_empty():
    r = OffsetRange("t", 0, 10, 21)
    pieces = split(r, 4)
    assert [(p.start, p.end) for p in pieces] == [(10, 12), (12, 15), (15, 18), (18, 21)]
    assert len(split(OffsetRange("t", 0, 0, 2), 5)) == 2


def test_plan_one_range_per_partition_with_data():
    ranges = plan_ranges({("t", 0): 5, ("t", 1): 3}, {("t", 0): 100, ("t", 1): 3, ("u", 0): 4})
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [("t", 0, 5, 100)]


def test_plan_unstarted_partition_reads_from_its_end_only():
    # end without start: nothing planned unless the caller supplies a start.
    assert plan_ranges({}, {("t", 0): 10}) == []


def test_plan_max_records_and_min_partitions():
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 1000, ("t", 1): 10}
    capped = plan_ranges(start, end, max_records=300)
    assert [r.size for r in capped] == [250, 250, 250, 250, 10]
    spread = plan_ranges(start, end, min_partitions=4)
    assert len(spread) >= 4
    assert sum(r.size for r in spread) == 1010
    assert [r for r in spread if r.partition == 1] == [OffsetRange("t", 1, 0, 10)]


@pytest.mark.parametrize("seed", range(20))
def test_planned_ranges_cover_every_offset_exactly_once(seed):
    rnd = random.Random(seed)
    start = {("t", p): rnd.randrange(0, 50) for p in range(rnd.randrange(1, 6))}
    end = {tp: s + rnd.randrange(0, 500) for tp, s in start.items()}
    ranges = plan_ranges(start, end, rnd.choice([None, 3, 10]), rnd.choice([None, 7, 100]))
    covered = sorted((r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end))
    expected = sorted((t, p, o) for (t, p), e in end.items() for o in range(start[(t, p)], e))
    assert covered == expected
    assert all(r.size > 0 for r in ranges)


def test_rate_limit_is_proportional_and_exact():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    end = {("t", 0): 300, ("t", 1): 200, ("t", 2): 7}
    capped = rate_limit(start, end, 100)
    assert capped == {("t", 0): 75, ("t", 1): 125, ("t", 2): 7}
    assert rate_limit(start, end, 1000) == end  # under the cap: everything


@pytest.mark.parametrize("seed", range(20))
def test_rate_limit_never_exceeds_cap_or_backlog(seed):
    rnd = random.Random(seed)
    start = {("t", p): rnd.randrange(0, 100) for p in range(rnd.randrange(1, 8))}
    end = {tp: s + rnd.randrange(0, 1000) for tp, s in start.items()}
    cap = rnd.randrange(1, 2000)
    capped = rate_limit(start, end, cap)
    taken = sum(capped[tp] - start[tp] for tp in start)
    assert taken == min(cap, sum(end[tp] - start[tp] for tp in start))
    assert all(start[tp] <= capped[tp] <= end[tp] for tp in start)
