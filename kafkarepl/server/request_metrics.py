"""Kafka's RequestMetrics (kafka.network:type=RequestMetrics), per request name:
RequestsPerSec by version, ErrorsPerSec by error, TotalTimeMs and ResponseSendTimeMs.

Names as Kafka's RequestChannel gives them: the API's name, except a Fetch, which is
`FetchConsumer` or `FetchFollower` (a replica's fetch). Served as Prometheus text the way
the JMX exporter's usual Kafka rules render the JMX beans:
`kafka_network_requestmetrics_requests_total{request="Produce",version="9"}`,
`kafka_network_requestmetrics_errors_total{request="Produce",error="NONE"}`, and the times
as summaries: `kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}`
with `_count` and `_sum` (ms).

The times go into log-scale buckets (4 per doubling, so a quantile is within 19% of the
true value) rather than Kafka's sampled reservoir: recording is a few integer operations
per request. The quantiles cover the last one to two windows (`window_s`, 60 s), so they
follow the current load as Kafka's exponentially decaying reservoir does; `_count` and
`_sum` count from the start.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol.api import API
from kafkarepl.protocol.error_counts import error_counts
from kafkarepl.protocol.schema import ApiKey

QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
_FLOOR_MS = 0.01  # the first bucket holds everything below
_STEPS = 4  # buckets per doubling
_BUCKETS = 100  # up to 0.01 ms * 2**25: ~335 s


def bucket_of(ms: float) -> int:
    if ms <= _FLOOR_MS:
        return 0
    return min(_BUCKETS - 1, 1 + int(_STEPS * math.log2(ms / _FLOOR_MS)))


def bucket_upper_ms(i: int) -> float:
    return _FLOOR_MS * 2 ** (i / _STEPS)


class TimeHistogram:
    """Latencies in ms: counts per bucket over two rotating windows, and totals."""

    __slots__ = ("count", "sum_ms", "_now", "_window_s", "_started", "_cur", "_prev")

    def __init__(self, now: Callable[[], float], window_s: float) -> None:
        self.count = 0
        self.sum_ms = 0.0
        self._now, self._window_s = now, window_s
        self._started = now()
        self._cur = [0] * _BUCKETS
        self._prev = [0] * _BUCKETS

    def _rotate(self, now: float) -> None:
        if now - self._started >= self._window_s:
            # A gap of more than one window leaves nothing recent in the previous one.
            self._prev = self._cur if now - self._started < 2 * self._window_s else [0] * _BUCKETS
            self._cur = [0] * _BUCKETS
            self._started = now

    def record(self, ms: float, now: float) -> None:
        """`now`: the clock's time (one reading serves every histogram of a request)."""
        self._rotate(now)
        self._cur[bucket_of(ms)] += 1
        self.count += 1
        self.sum_ms += ms

    def quantiles(self) -> list[float]:
        """QUANTILES' values (each bucket's upper bound) over the recent windows; 0 when none."""
        self._rotate(self._now())
        counts = [a + b for a, b in zip(self._cur, self._prev, strict=True)]
        n = sum(counts)
        out = []
        for q in QUANTILES:
            if n == 0:
                out.append(0.0)
                continue
            rank, seen = q * n, 0
            for i, c in enumerate(counts):
                seen += c
                if seen >= rank:
                    out.append(round(bucket_upper_ms(i), 3))
                    break
        return out


class _PerRequest:
    __slots__ = ("by_version", "errors", "total", "send")

    def __init__(self, now: Callable[[], float], window_s: float) -> None:
        self.by_version: dict[int, int] = {}
        self.errors: dict[int, int] = {}
        self.total = TimeHistogram(now, window_s)
        self.send = TimeHistogram(now, window_s)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class RequestMetrics:
    def __init__(self, now: Callable[[], float] = time.monotonic, window_s: float = 60.0) -> None:
        self._now, self._window_s = now, window_s
        self._by_name: dict[str, _PerRequest] = {}

    @staticmethod
    def name_of(key: int, body: dict[str, Any]) -> str:
        """Kafka's metric name for a request: Fetch split by who fetches."""
        if key == ApiKey.FETCH:
            return "FetchFollower" if body.get("replica_id", -1) >= 0 else "FetchConsumer"
        spec = API.get(key)
        return spec.name if spec is not None else str(key)

    def record(self, name: str, key: int, version: int, total_ms: float, send_ms: float,
               answer: dict[str, Any] | None | BaseException, errors: dict[int, int] | None = None) -> None:
        """One request answered (or, for acks=0, done): its times and its answer's errors
        (an answer that failed as a whole counts its error code once); `errors`: the
        answer's error counts when already walked (a large answer, on the codec thread)."""
        m = self._by_name.get(name)
        if m is None:
            m = self._by_name[name] = _PerRequest(self._now, self._window_s)
        m.by_version[version] = m.by_version.get(version, 0) + 1
        now = self._now()
        m.total.record(total_ms, now)
        m.send.record(send_ms, now)
        if isinstance(answer, BaseException):
            code = int(getattr(answer, "code", ErrorCode.UNKNOWN_SERVER_ERROR))
            m.errors[code] = m.errors.get(code, 0) + 1
        elif answer is not None:
            for code, n in (errors if errors is not None else error_counts(key, version, answer)).items():
                m.errors[code] = m.errors.get(code, 0) + n

    def snapshot(self) -> dict[str, float]:
        out: dict[str, float] = {}
        p = "kafka_network_requestmetrics_"
        for name, m in self._by_name.items():
            for v, n in m.by_version.items():
                out[f'{p}requests_total{{request="{name}",version="{v}"}}'] = n
            for code, n in m.errors.items():
                out[f'{p}errors_total{{request="{name}",error="{_error_name(code)}"}}'] = n
            for metric, h in (("totaltimems", m.total), ("responsesendtimems", m.send)):
                for q, value in zip(QUANTILES, h.quantiles(), strict=True):
                    out[f'{p}{metric}{{request="{name}",quantile="{q}"}}'] = value
                out[f'{p}{metric}_count{{request="{name}"}}'] = h.count
                out[f'{p}{metric}_sum{{request="{name}"}}'] = round(h.sum_ms, 3)
        return out
