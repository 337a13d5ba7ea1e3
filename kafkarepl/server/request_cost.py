"""The broker time a request costs outside its handler (decoding it, encoding its
answer), for the request-time quota (request_percentage): Kafka counts its network
threads' time as well as its request handlers'. The connection measures it; the quota
gate, running in the request's context, says whose quota it counts against."""

from __future__ import annotations

import contextvars
from typing import Protocol


class RequestCost:
    __slots__ = ("network_s", "account")

    def __init__(self, network_s: float) -> None:
        self.network_s = network_s  # measured by the connection, not yet counted
        self.account: tuple[str, str] | None = None  # (user, client id) whose quota counts it


class CostSink(Protocol):
    @property
    def active(self) -> bool: ...

    def record_network(self, account: tuple[str, str], seconds: float) -> None: ...


_cost: contextvars.ContextVar[RequestCost | None] = contextvars.ContextVar("kafkarepl_request_cost", default=None)


def set_request_cost(cost: RequestCost) -> None:
    _cost.set(cost)


def current_cost() -> RequestCost | None:
    return _cost.get()
