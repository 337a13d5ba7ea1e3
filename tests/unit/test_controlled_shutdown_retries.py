"""The broker's side of a controlled shutdown (Kafka's KafkaServer.controlledShutdown):
attempts up to controlled.shutdown.max.retries, each failed one followed by
controlled.shutdown.retry.backoff.ms."""

from __future__ import annotations

import asyncio
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.server.controller_apis import request_controlled_shutdown

LEFT = {"error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 0}]}
DONE = {"error_code": 0, "remaining_partitions": []}


class ScriptedController:
    """Answers (or raises) in order, as the controller would across attempts."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[dict] = []

    async def send(self, api_key: Any, version: int, body: dict) -> dict:
        self.sent.append(body)
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a


def _run(channel: ScriptedController, retries: int, backoff_ms: int) -> tuple[bool, list[float]]:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    ok = asyncio.run(request_controlled_shutdown(channel, 7, 42, retries, backoff_ms, sleep))  # type: ignore[arg-type]
    return ok, slept


def test_partitions_left_are_retried_after_the_backoff_until_none_remain() -> None:
    ch = ScriptedController(LEFT, LEFT, DONE)
    assert _run(ch, 3, 5000) == (True, [5.0, 5.0])
    assert ch.sent == [{"broker_id": 7, "broker_epoch": 42}] * 3


def test_an_error_or_an_unreachable_controller_is_retried_too() -> None:
    ch = ScriptedController(ConnectionError("refused"), {"error_code": int(ErrorCode.NOT_CONTROLLER),
                                                         "remaining_partitions": []}, DONE)
    assert _run(ch, 3, 200) == (True, [0.2, 0.2])


def test_an_error_code_unknown_here_is_retried_like_any_other() -> None:
    ch = ScriptedController({"error_code": 9999, "remaining_partitions": []}, DONE)
    assert _run(ch, 3, 100) == (True, [0.1])


def test_after_the_last_failed_attempt_it_gives_up() -> None:
    """As Kafka: the backoff follows every failed attempt, the last one included; the
    broker then stops anyway."""
    ch = ScriptedController(LEFT, LEFT)
    assert _run(ch, 2, 1000) == (False, [1.0, 1.0])
    assert not ch.answers


def test_at_least_one_attempt_whatever_the_retries() -> None:
    ch = ScriptedController(DONE)
    assert _run(ch, 0, 1000) == (True, [])
