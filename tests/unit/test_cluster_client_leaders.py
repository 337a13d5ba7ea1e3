"""ClusterClient's per-leader requests (list_offsets, delete_records): each partition goes
to its leader, a moved leader is asked again, and one leader's failure is only its own
partitions' (a client-side timeout included, and not retried)."""

from __future__ import annotations

import asyncio

from kafkarepl.client.cluster import ClusterClient
from kafkarepl.client.connection import RequestTimeoutError
from kafkarepl.errors import ErrorCode


class Routed(ClusterClient):
    """The Metadata and per-broker answers of a scripted cluster."""

    def __init__(self, leaders: list[dict[int, int]], answers) -> None:
        super().__init__("127.0.0.1:1", request_timeout=30.0)
        self.leaders = leaders  # successive metadata answers: partition -> leader
        self.answers = answers  # (broker, call number) -> body or exception
        self.sent: list[tuple[int, dict]] = []

    async def metadata(self, topics=None, allow_auto_topic_creation=False) -> dict:
        leaders = self.leaders[0] if len(self.leaders) == 1 else self.leaders.pop(0)
        self.topics["t"] = {"name": "t", "error_code": 0, "partitions": [
            {"partition_index": p, "leader_id": b} for p, b in leaders.items()]}
        return {}

    async def send(self, api_key, body, node_id=None, api_version=None) -> dict:
        self.sent.append((node_id, body))
        answer = self.answers(node_id, body, sum(1 for b, _ in self.sent if b == node_id))
        if isinstance(answer, Exception):
            raise answer
        return answer


def deleted(body: dict, error: int = 0) -> dict:
    return {"topics": [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "low_watermark": p["offset"], "error_code": error}
        for p in t["partitions"]]} for t in body["topics"]]}


def test_one_leaders_timeout_is_its_partitions_and_not_retried() -> None:
    def answers(broker, body, n):
        return RequestTimeoutError("no response within 30.0s") if broker == 1 else deleted(body)

    c = Routed([{0: 1, 1: 2}], answers)
    out = asyncio.run(c.delete_records({("t", 0): 5, ("t", 1): 7}, timeout_ms=60_000))
    assert out == {("t", 0): (ErrorCode.REQUEST_TIMED_OUT, -1), ("t", 1): (ErrorCode.NONE, 7)}
    assert [b for b, _ in c.sent].count(1) == 1  # not asked again
    assert all(body["timeout_ms"] == 28_000 for _, body in c.sent)  # ends before the client's own 30 s


def test_a_moved_leader_is_asked_again() -> None:
    def answers(broker, body, n):
        return deleted(body, int(ErrorCode.NOT_LEADER_OR_FOLLOWER)) if broker == 1 else deleted(body)

    c = Routed([{0: 1}, {0: 2}], answers)
    out = asyncio.run(c.delete_records({("t", 0): 5}))
    assert out == {("t", 0): (ErrorCode.NONE, 5)} and [b for b, _ in c.sent] == [1, 2]
