"""Request layer of the controller's APIs. Kafka's clients find the controller through
Metadata; kcat, simple tools and our own brokers may ask any broker, which relays."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey, Request
from kafkarepl.server.controller_channel import ControllerChannel

log = logging.getLogger(__name__)

Body = dict[str, Any]


class ControllerApis:
    def __init__(self, channel: ControllerChannel) -> None:
        self.channel = channel

    async def _relay(self, req: Request, failure: Body) -> Body:
        try:
            return await self.channel.send(req.api_key, req.api_version, req.body)
        except KafkaError as exc:
            return {**failure, "error_code": int(exc.code)}

    async def elect_leaders(self, req: Request) -> Body:
        return await self._relay(req, {"throttle_time_ms": 0, "replica_election_results": []})

    async def alter_partition_reassignments(self, req: Request) -> Body:
        return await self._relay(req, {"throttle_time_ms": 0, "error_message": None, "responses": []})

    async def list_partition_reassignments(self, req: Request) -> Body:
        c = self.channel.active_local()
        if c is None:
            return await self._relay(req, {"throttle_time_ms": 0, "error_message": None, "topics": []})
        wanted = req.body.get("topics")
        topics: dict[str, list[Body]] = {}
        for (t, p), (replicas, adding, removing) in sorted(c.list_partition_reassignments().items()):
            if wanted is not None and not any(w["name"] == t and p in w["partition_indexes"] for w in wanted):
                continue
            topics.setdefault(t, []).append({"partition_index": p, "replicas": list(replicas),
                                             "adding_replicas": list(adding), "removing_replicas": list(removing)})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    async def alter_partition(self, req: Request) -> Body:
        c = self.channel.active_local()
        if c is None:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "topics": []}
        return await c.handle_alter_partition(req.body)

    async def controlled_shutdown(self, req: Request) -> Body:
        c = self.channel.active_local()
        if c is None:
            return {"error_code": int(ErrorCode.NOT_CONTROLLER), "remaining_partitions": []}
        return await c.handle_controlled_shutdown(req.body)


async def request_controlled_shutdown(channel: ControllerChannel, broker_id: int, broker_epoch: int,
                                      retries: int, backoff_ms: int,
                                      sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> bool:
    """SIGTERM path: ask the controller to move leadership off this broker first. As
    Kafka's controlledShutdown: up to controlled.shutdown.max.retries attempts, each
    failed one (an error, partitions left that could not move, or no controller
    reachable) followed by controlled.shutdown.retry.backoff.ms. False: every attempt
    failed (the broker then stops anyway, an unclean shutdown for those partitions)."""
    body = {"broker_id": broker_id, "broker_epoch": broker_epoch}
    attempts = max(1, retries)
    for attempt in range(1, attempts + 1):
        try:
            resp = await channel.send(ApiKey.CONTROLLED_SHUTDOWN, 3, body)
        except Exception as exc:  # noqa: BLE001 - the controller moving or unreachable: retried
            why = f"{type(exc).__name__}: {exc}"
        else:
            if not resp["error_code"] and not resp["remaining_partitions"]:
                return True
            code = resp["error_code"]
            why = (f"error {code} ({_error_name(code)})" if code
                   else f"{len(resp['remaining_partitions'])} partitions still led here")
        log.info("controlled shutdown attempt %d of %d failed (%s); %s", attempt, attempts, why,
                 f"retrying in {backoff_ms} ms" if attempt < attempts else "giving up after the backoff")
        await sleep(backoff_ms / 1000)
    log.warning("controlled shutdown failed after %d attempts: proceeding to an unclean shutdown", attempts)
    return False


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:  # a code this broker does not know: said as a number only
        return "unknown"
