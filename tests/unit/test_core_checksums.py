"""CRC32C and XXH64 of the C core against independent implementations (crc32c, xxhash)."""

from __future__ import annotations

import mmap
import os
import random
import subprocess
import sys

import crc32c as crc32c_ref
import numpy as np
import pytest
import xxhash

from kafkarepl import _core

# Lengths around the interleave block sizes (3 x 256, 3 x 1024, 3 x 8192) and word boundaries.
LENGTHS = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 255, 256, 257, 767, 768, 769, 1000, 3071, 3072, 3073, 3072 + 768 + 5,
           8191, 8192, 8193, 24575, 24576, 24577, 49152 + 777, 65535, 65536, 65537, 200_003]

IMPLEMENTATIONS = [_core.crc32c, _core._crc32c_table]
if _core.crc32c_backend() == "sse4.2":
    IMPLEMENTATIONS.append(_core._crc32c_sse42)


@pytest.fixture(scope="module")
def data() -> bytes:
    return random.Random(1234).randbytes(300_000)


def test_known_vector():
    assert _core.crc32c(b"123456789") == 0xE3069283
    assert _core._crc32c_table(b"123456789") == 0xE3069283
    assert _core.crc32c(b"") == 0


def test_backend_matches_cpu():
    with open("/proc/cpuinfo") as f:
        has_sse42 = "sse4_2" in f.read()
    assert _core.crc32c_backend() == ("sse4.2" if has_sse42 else "table")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda f: f.__name__)
def test_crc32c_matches_reference_all_lengths_and_alignments(impl, data):
    view = memoryview(data)
    for length in LENGTHS:
        for misalign in range(8):
            chunk = view[misalign : misalign + length]
            assert impl(chunk) == crc32c_ref.crc32c(chunk), (length, misalign)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda f: f.__name__)
def test_crc32c_random_buffers(impl):
    rnd = random.Random(99)
    for _ in range(200):
        buf = rnd.randbytes(rnd.randrange(0, 40_000))
        assert impl(buf) == crc32c_ref.crc32c(buf)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda f: f.__name__)
def test_crc32c_chaining(impl, data):
    for split in (0, 1, 5, 1000, 30_000):
        head, tail = data[:split], data[split:100_000]
        assert impl(tail, impl(head)) == crc32c_ref.crc32c(data[:100_000])
        assert impl(tail, 0xDEADBEEF) == crc32c_ref.crc32c(tail, 0xDEADBEEF)


def test_crc32c_accepts_buffer_protocol_objects(data):
    expected = crc32c_ref.crc32c(data[:5000])
    with mmap.mmap(-1, 5000) as m:
        m.write(data[:5000])
        assert _core.crc32c(m) == expected
    assert _core.crc32c(bytearray(data[:5000])) == expected
    assert _core.crc32c(np.frombuffer(data[:5000], dtype=np.uint8)) == expected


@pytest.mark.parametrize("value", [-1, 2**32])
def test_crc32c_rejects_out_of_range_start(value):
    with pytest.raises(ValueError):
        _core.crc32c(b"x", value)


def test_crc32c_rejects_non_contiguous_buffer():
    strided = memoryview(bytes(range(100)))[::2]
    with pytest.raises(BufferError):
        _core.crc32c(strided)


def test_xxh64_matches_xxhash(data):
    rnd = random.Random(7)
    for length in [*range(0, 80), 1000, 4096, 65536, 100_001]:
        start = rnd.randrange(0, 8)
        chunk = data[start : start + length]
        for seed in (0, 1, 0x9E3779B185EBCA87, 2**64 - 1):
            assert _core.xxh64(chunk, seed) == xxhash.xxh64_intdigest(chunk, seed), (length, seed)


def test_xxh64_empty_vector():
    assert _core.xxh64(b"") == 0xEF46DB3751D8E999


def test_table_backend_can_be_forced_for_the_whole_module():
    script = (
        "import crc32c, os\n"
        "from kafkarepl import _core\n"
        "assert _core.crc32c_backend() == 'table'\n"
        "data = os.urandom(100_003)\n"
        "assert _core.crc32c(data) == crc32c.crc32c(data)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "KAFKAREPL_CRC32C": "table"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "ok"
