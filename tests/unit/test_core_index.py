"""Sparse offset/time index binary search of the C core vs a bisect reference."""

from __future__ import annotations

import bisect
import mmap
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl import _core

INDEX = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
TIMEINDEX = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])


def reference(keys: list[int], target: int) -> int:
    return bisect.bisect_right(keys, target) - 1


def test_index_lookup_matches_bisect():
    rnd = random.Random(5)
    keys = sorted(rnd.sample(range(0, 10_000_000), 5000))
    entries = np.zeros(len(keys), dtype=INDEX)
    entries["relative_offset"] = keys
    entries["position"] = np.arange(len(keys)) * 4096
    buf = entries.tobytes() + b"\x00" * 8 * 10  # preallocated, unused slots at the end
    targets = [-(2**40), -1, 0, keys[0], keys[-1], keys[-1] + 1, 2**31, 2**70]
    targets += [k + d for k in rnd.sample(keys, 300) for d in (-1, 0, 1)]
    for target in targets:
        assert _core.index_lookup(buf, len(keys), target) == reference(keys, target), target


def test_timeindex_lookup_matches_bisect_over_mmap(tmp_path):
    rnd = random.Random(6)
    stamps = sorted(rnd.sample(range(1_600_000_000_000, 1_700_000_000_000), 2000))
    entries = np.zeros(len(stamps), dtype=TIMEINDEX)
    entries["timestamp"] = stamps
    entries["relative_offset"] = np.arange(len(stamps))
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(entries.tobytes())
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for target in [0, stamps[0] - 1, *rnd.sample(stamps, 200), stamps[-1] + 5, 2**63 - 1]:
            assert _core.timeindex_lookup(m, len(stamps), target) == reference(stamps, target)
        assert _core.timeindex_lookup(m, len(stamps), -(2**64)) == -1


def test_negative_keys_are_signed():
    entries = np.array([(-5, 0), (3, 1)], dtype=INDEX).tobytes()
    assert _core.index_lookup(entries, 2, -6) == -1
    assert _core.index_lookup(entries, 2, -5) == 0
    assert _core.index_lookup(entries, 2, 2) == 0


def test_empty_index():
    assert _core.index_lookup(b"", 0, 100) == -1
    assert _core.timeindex_lookup(b"\x00" * 12, 0, 100) == -1


@pytest.mark.parametrize(("size", "n"), [(15, 2), (16, 3), (0, 1), (100, -1)])
def test_entry_count_must_fit_the_buffer(size, n):
    with pytest.raises(ValueError):
        _core.index_lookup(b"\x00" * size, n, 0)
    with pytest.raises(ValueError):
        _core.timeindex_lookup(b"\x00" * (size * 12 // 8), n, 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(-5, 60), st.integers(-(2**70), 2**70))
def test_fuzz_lookups_on_random_bytes(data, n, target):
    for lookup, width in ((_core.index_lookup, 8), (_core.timeindex_lookup, 12)):
        try:
            slot = lookup(data, n, target)
        except ValueError:
            assert n < 0 or n * width > len(data)
        else:
            assert -1 <= slot < n
