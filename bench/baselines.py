"""Baselines the per-request benchmarks compare with, measured in the same run."""

from __future__ import annotations

from collections.abc import Callable

from kafkarepl.protocol import ApiKey, decode_request, encode_request


def produce_decode(rounds: int) -> Callable[[], None]:
    """`rounds` decodings of a Produce v9 request of 16 KiB: the least work the broker
    does for a produce request."""
    body = {"acks": 1, "timeout_ms": 30000, "topic_data": [{"name": "bench", "partition_data": [
        {"index": 0, "records": b"\x00" * (16 << 10)}]}]}
    frame = memoryview(bytearray(encode_request(ApiKey.PRODUCE, 9, 1, "bench", body)))[4:]

    def many() -> None:
        for _ in range(rounds):
            decode_request(frame)

    return many
