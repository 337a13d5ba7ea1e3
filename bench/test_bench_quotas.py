"""What client quotas cost a request (run: pytest bench/test_bench_quotas.py --benchmark-enable).

  gate_*        ClientQuotaGate.serve around a no-op handler: no quota configured (the
                check every request pays), a quota configured for other clients (the
                lookups every request pays once any quota exists), and this client's
                own produce and request-time quotas (the turns, the recording, the timer)
  produce_decode  decoding a Produce v9 request of 16 KiB, the same run's baseline: the
                least work the broker does for a produce request
"""

from __future__ import annotations

import asyncio

import pytest

from bench.baselines import produce_decode
from kafkarepl.protocol import ApiKey, Request
from kafkarepl.server.client_quotas import CLIENT_ID, ClientQuotas, entity_of
from kafkarepl.server.quota_gate import ClientQuotaGate

ROUNDS = 2000  # requests per benchmark call, all through one event loop


class _Conn:
    principal = "User:ANONYMOUS"

    def __init__(self) -> None:
        self.quota_tail = None

    def throttle(self, ms: int) -> None:
        pass

    def muted_for(self) -> float:
        return 0.0


async def _serve(req: Request) -> dict:
    return {"throttle_time_ms": 0, "responses": []}


def _gate(configs: dict) -> ClientQuotaGate:
    q = ClientQuotas(lambda: 0)
    for entity, values in configs.items():
        q.set_config(entity_of(entity), values)
    return ClientQuotaGate(q)


CASES = {
    "none": {},
    "others": {((CLIENT_ID, "someone-else"),): {"producer_byte_rate": 1e12, "request_percentage": 1e6}},
    "own": {((CLIENT_ID, "bench"),): {"producer_byte_rate": 1e12, "request_percentage": 1e6}},
}


@pytest.mark.parametrize("case", list(CASES))
def test_gate(benchmark, case: str) -> None:
    gate = _gate(CASES[case])
    req = Request(ApiKey.PRODUCE, 9, 1, "bench", {"acks": 1}, 20, 16 << 10)
    loop = asyncio.new_event_loop()

    async def many() -> None:
        conn = _Conn()
        for _ in range(ROUNDS):
            if gate.active:
                await gate.serve(req, conn, _serve)
            else:
                await _serve(req)

    try:
        benchmark(lambda: loop.run_until_complete(many()))
    finally:
        loop.close()


def test_produce_decode(benchmark) -> None:
    benchmark(produce_decode(ROUNDS))
