"""FrameReader: split a byte stream into frames, zero copy, enforcing the size limit."""

from __future__ import annotations

import random
import struct

import pytest

from kafkarepl.errors import InvalidRequestError
from kafkarepl.protocol import FrameReader, FrameTooLargeError


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@pytest.mark.parametrize("chunk_size", [16, 100, 64 * 1024])
def test_any_split_of_the_stream_gives_the_same_frames(chunk_size: int) -> None:
    rng = random.Random(chunk_size)
    payloads = [rng.randbytes(rng.choice([0, 1, 3, 50, 300, 5000])) for _ in range(200)]
    stream = framed(payloads)
    reader = FrameReader(max_frame_size=10_000, chunk_size=chunk_size)
    got = []
    pos = 0
    while pos < len(stream):
        n = rng.choice([1, 2, 3, 7, 100, 4096, 20000])
        got.extend(bytes(f) for f in reader.feed(stream[pos:pos + n]))
        pos += n
    assert got == payloads
    assert reader.buffered == 0


def test_buffered_protocol_interface_reads_straight_into_frames() -> None:
    payloads = [b"a" * 10, b"b" * 70_000, b"c"]
    stream = framed(payloads)
    reader = FrameReader(max_frame_size=1 << 20, chunk_size=1024)
    got = []
    pos = 0
    while pos < len(stream):
        buf = reader.get_buffer(-1)
        n = min(len(buf), len(stream) - pos, 5000)
        buf[:n] = stream[pos:pos + n]
        pos += n
        got.extend(reader.buffer_updated(n))
    assert [bytes(f) for f in got] == payloads
    big = got[1]
    assert not big.readonly and len(big.obj) >= 70_004  # its own chunk, sized for it


def test_frames_stay_valid_after_more_data_arrives() -> None:
    reader = FrameReader(max_frame_size=100, chunk_size=32)
    first = reader.feed(framed([b"x" * 20]))
    later = reader.feed(framed([b"y" * 20] * 10))
    assert bytes(first[0]) == b"x" * 20 and all(bytes(f) == b"y" * 20 for f in later)
    first[0][0] = ord("z")  # writable, and writing does not disturb other frames
    assert all(bytes(f) == b"y" * 20 for f in later)


@pytest.mark.parametrize("size", [-1, -(1 << 31), 101, 1 << 30])
def test_bad_sizes_are_rejected_before_allocating(size: int) -> None:
    reader = FrameReader(max_frame_size=100)
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed(struct.pack(">i", size) + b"abc")
    assert isinstance(info.value, InvalidRequestError) and info.value.size == size
    assert "socket.request.max.bytes" in str(info.value)


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    reader = FrameReader(max_frame_size=100, chunk_size=16)
    assert [bytes(f) for f in reader.feed(framed([b"q" * 100]))] == [b"q" * 100]
